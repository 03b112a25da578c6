"""The worker's inbox dispatcher: take messages from the inbox and hand them on.

Messages of one request are handled in arrival order. A payload for a stage
goes to the stage runner; a streamed chunk goes to the consumer's
:class:`ChunkChannel` (the runner starts the consumer on the first one); a
cancel aborts the request everywhere in this process; credit opens a
producer's gate; appended input goes to its stage's ``append`` hook; a peer list
or a peer's death goes to the plane. Messages for
a request that finished here are dropped (and their shared memory released).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from .. import envelope as E
from ..payload import StagePayload
from .requests import WorkerRequests
from .runner import StageRunner

log = logging.getLogger("omni.worker")

if TYPE_CHECKING:  # the transport (and torch) is imported in the worker process only
    from ..transport import Message


class InboxDispatcher:
    """Serves one process's inbox until SHUTDOWN."""

    def __init__(self, plane: Any, requests: WorkerRequests, runner: StageRunner) -> None:
        self.plane = plane
        self.requests = requests
        self.runner = runner
        self.loop = requests.loop
        self._stopped: asyncio.Future[None] = self.loop.create_future()
        self._queued: deque[Message] = deque()
        self._busy = False

    async def serve(self) -> None:
        """Handle inbound messages, in order, until SHUTDOWN.

        Messages are taken from the inbox's reader callback (``listen``), not
        by a task awaiting each batch: that saves a Future and a task switch,
        one whole trip through the event loop, on every hop. The handling is
        synchronous except for a large decode (off the loop) and a failure
        report; such a message finishes in a task, and the messages after it
        wait for that task, as they waited for the receive loop before.
        """
        inbox = self.plane.inbox
        inbox.listen(self._take_messages)
        try:
            await self._stopped
        finally:
            inbox.listen(None)

    def _take_messages(self) -> None:
        """Inbox callback (and the end of a message handled in a task): handle what is queued."""
        if self._busy or self._stopped.done():
            return
        try:
            self._handle_queued()
        except Exception as exc:  # noqa: BLE001 - what ended the receive loop before now ends serve (and the worker)
            if not self._stopped.done():
                self._stopped.set_exception(exc)

    def _handle_queued(self) -> None:
        queued = self._queued
        while True:
            if not queued:
                queued.extend(self.plane.inbox.recv_batch_nowait())
                if not queued:
                    return
            msg = queued.popleft()
            if msg.header[E.KIND] == E.SHUTDOWN:
                msg.discard()
                while queued:
                    queued.popleft().discard()
                self._stopped.set_result(None)
                return
            rest = self._on_message(msg)
            if rest is not None:
                self._busy = True
                self.loop.create_task(rest).add_done_callback(self._message_task_done)
                return

    def _message_task_done(self, task: asyncio.Task[None]) -> None:
        self._busy = False
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            if not self._stopped.done():
                self._stopped.set_exception(exc)
            return
        self._take_messages()

    def _on_message(self, msg: Message) -> Coroutine[Any, Any, None] | None:
        """Handle one message now; returns a coroutine to run before the next message when it needs an await."""
        h = msg.header
        kind = h[E.KIND]
        rid = h.get(E.RID, "")
        if kind == E.CANCEL:
            msg.discard()
            req = self.requests.get(rid)
            self.requests.mark_finished(rid)
            if req is not None:
                self.requests.abort(req)
            return None
        if kind == E.CREDIT:
            msg.discard()
            req = self.requests.get(rid)
            if req is not None:
                gate = req.gates.get((h.get(E.STAGE, ""), h.get(E.INSTANCE, "")))
                if gate is not None:
                    gate.grant(int(h.get(E.COUNT, 0)))
            return None
        if kind == E.APPEND:
            return self._on_append(msg, rid)
        if kind == E.PEER_DIED:
            msg.discard()
            self.plane.peer_died(h.get(E.SRC, ""))
            return None
        if kind == E.PEERS:
            self.plane.learn(msg.payload())
            return None
        if self.requests.is_finished(rid):
            msg.discard()
            return None
        has_data = h.get(E.HAS_DATA, False)
        if not has_data:
            msg.discard()
            self._deliver(h, rid, kind, None, has_data)
            return None
        if msg.decodes_off_loop:
            return self._decode_and_deliver(msg)
        try:
            data = msg.payload()
        except Exception as exc:  # noqa: BLE001 - a malformed or stale message fails its request only
            return self._fail_receive(msg, exc)
        self._deliver(h, rid, kind, data, has_data)
        return None

    def _on_append(self, msg: Message, rid: str) -> Coroutine[Any, Any, None] | None:
        """Input appended to a running request: its stage's ``append(request_id, data, final)`` hook, called on
        this event loop (it must be quick). A request that already finished here drops it (its result is on its
        way); a hook that raises, or a stage without one, fails the request."""
        req = self.requests.get(rid)
        if req is None or self.requests.is_finished(rid):
            msg.discard()
            return None
        h = msg.header
        stage = h.get(E.STAGE, "")
        adapter = self.runner.stages.adapters.get(stage)
        hook = getattr(adapter.obj, "append", None) if adapter is not None else None
        try:
            data = msg.payload() if h.get(E.HAS_DATA) else None
            if not callable(hook):
                raise TypeError(f"stage {stage} takes no appended input (its stage object has no append hook)")
            hook(rid, data, bool(h.get(E.FINAL, False)))
        except Exception as exc:  # noqa: BLE001 - a refused piece fails its request only
            msg.discard()
            return self.runner.fail(req, stage, exc, what="append")
        return None

    async def _decode_and_deliver(self, msg: Message) -> None:
        h = msg.header
        try:
            data = await msg.payload_async()
        except Exception as exc:  # noqa: BLE001 - a malformed or stale message fails its request only
            await self._fail_receive(msg, exc)
            return
        self._deliver(h, h.get(E.RID, ""), h[E.KIND], data, True)

    async def _fail_receive(self, msg: Message, exc: Exception) -> None:
        msg.discard()
        h = msg.header
        req = self.requests.open(h.get(E.RID, ""), h.get(E.BINDING, {}), h.get(E.DEADLINE))
        await self.runner.fail(req, h.get(E.STAGE, ""), exc, what="receive")

    def _deliver(self, h: dict[str, Any], rid: str, kind: str, data: Any, has_data: bool) -> None:
        req = self.requests.open(rid, h.get(E.BINDING, {}), h.get(E.DEADLINE))
        timings = h.get(E.TIMINGS)
        if timings:
            req.timings.update(timings)
        stage = h[E.STAGE]
        if kind == E.RUN:
            self.runner.on_payload(req, stage, h.get(E.SRC, ""), StagePayload(rid, data))
        elif kind == E.CHUNK:
            self.runner.channel(req, stage).put_nowait(data, h.get(E.INSTANCE))
        elif kind == E.DONE:
            self.runner.channel(req, stage).finish(StagePayload(rid, data) if has_data else None)
