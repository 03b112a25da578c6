"""A worker's inbound side: take messages from the inbox and hand them to stages.

Messages of one request are handled in arrival order. A payload for a stage
starts that stage's task; a streamed chunk goes to the consumer's
:class:`ChunkChannel` (starting the consumer on the first one); a cancel
aborts the request everywhere in this process. Requests that finished here
are remembered for a while, so late messages for them are dropped (and their
shared memory released) instead of starting work nobody waits for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from .. import envelope as E
from ..errors import RequestCancelled
from ..flow import CreditReturn
from ..payload import StagePayload
from .channel import ChunkChannel
from .state import RequestState, WorkerState

log = logging.getLogger("omni.worker")

if TYPE_CHECKING:  # the transport (and torch) is imported in the worker process only
    from ..transport import Message


class Inbound(WorkerState):
    async def _serve(self) -> None:
        """Handle inbound messages, in order, until SHUTDOWN.

        Messages are taken from the inbox's reader callback (``listen``), not
        by a task awaiting each batch: that saves a Future and a task switch,
        one whole trip through the event loop, on every hop. The handling is
        synchronous except for a large decode (off the loop) and a failure
        report; such a message finishes in a task, and the messages after it
        wait for that task, as they waited for the receive loop before.
        """
        self._stopped: asyncio.Future[None] = self.loop.create_future()
        self._queued: deque[Message] = deque()
        self._busy = False
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
        except Exception as exc:  # noqa: BLE001 - what ended the receive loop before now ends _serve (and the worker)
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
            self._mark_finished(rid)
            if req is not None:
                self._abort(req)
            return None
        if kind == E.CREDIT:
            msg.discard()
            req = self.requests.get(rid)
            if req is not None:
                gate = req.gates.get((h.get(E.STAGE, ""), h.get(E.INSTANCE, "")))
                if gate is not None:
                    gate.grant(int(h.get(E.COUNT, 0)))
            return None
        if kind == E.PEER_DIED:
            msg.discard()
            peer = h.get(E.SRC, "")
            self.plane.peer_died(peer)
            return None
        if kind == E.PEERS:
            self.plane.learn(msg.payload())
            return None
        if rid in self.finished:
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
        req = self._request(h.get(E.RID, ""), h.get(E.BINDING, {}), h.get(E.DEADLINE))
        await self._fail(req, h.get(E.STAGE, ""), exc, what="receive")

    def _deliver(self, h: dict[str, Any], rid: str, kind: str, data: Any, has_data: bool) -> None:
        req = self._request(rid, h.get(E.BINDING, {}), h.get(E.DEADLINE))
        timings = h.get(E.TIMINGS)
        if timings:
            req.timings.update(timings)
        stage = h[E.STAGE]
        if kind == E.RUN:
            self._on_payload(req, stage, h.get(E.SRC, ""), StagePayload(rid, data))
        elif kind == E.CHUNK:
            self._channel(req, stage).put_nowait(data, h.get(E.INSTANCE))
        elif kind == E.DONE:
            self._channel(req, stage).finish(StagePayload(rid, data) if has_data else None)

    def _request(self, rid: str, binding: dict[str, int], deadline: float | None = None) -> RequestState:
        req = self.requests.get(rid)
        if req is None:
            req = self.requests[rid] = RequestState(rid, dict(binding), asyncio.Event(), deadline=deadline)
            if deadline is not None:
                # One clock for every host: the parent set the deadline in epoch seconds.
                req.expiry = self.loop.call_later(max(deadline - time.time(), 0.0), self._expire, req)
        return req

    def _expire(self, req: RequestState) -> None:
        """The request's deadline passed: stop its work here (the parent fails it for the client)."""
        if self.requests.get(req.rid) is not req:
            return
        log.info("request %s passed its deadline: cancelled here", req.rid)
        self._mark_finished(req.rid)
        self._abort(req)

    def _mark_finished(self, rid: str) -> None:
        self.finished[rid] = None
        while len(self.finished) > 10000:
            self.finished.popitem(last=False)

    def _on_payload(self, req: RequestState, stage: str, src: str, payload: StagePayload) -> None:
        sources = self.router.wait_sources[stage]
        if sources and src in sources:
            parts = req.parts.setdefault(stage, {})
            parts[src] = payload
            if not all(s in parts for s in sources):
                return
            del req.parts[stage]
            self._spawn(req, self._merge_and_run(req, stage, parts))
            return
        self._spawn(req, self._run_stage(req, stage, payload, None))

    def _channel(self, req: RequestState, stage: str) -> ChunkChannel:
        channel = req.channels.get(stage)
        if channel is None:
            returns = CreditReturn()

            def on_taken(origin: str) -> None:
                count = returns.took(origin)
                if count:
                    self._return_credit(req, stage, origin, count)

            channel = req.channels[stage] = ChunkChannel(self.loop, producers=len(self.router.stream_producers[stage]), on_taken=on_taken)
            self._spawn(req, self._run_stage(req, stage, None, channel))
        return channel

    def _spawn(self, req: RequestState, coro: Any) -> None:
        task = self.loop.create_task(coro)
        req.tasks.add(task)
        task.add_done_callback(lambda t: self._task_done(req, t))

    def _task_done(self, req: RequestState, task: asyncio.Task[Any]) -> None:
        req.tasks.discard(task)
        if not req.tasks and not req.parts and self.requests.get(req.rid) is req:
            del self.requests[req.rid]
            req.close()

    def _abort(self, req: RequestState) -> None:
        req.cancel.set()
        req.close()
        for channel in req.channels.values():
            channel.abort(RequestCancelled())
        for gate in req.gates.values():
            gate.abort(RequestCancelled())
        current = asyncio.current_task()
        for task in list(req.tasks):
            if task is not current:
                task.cancel()
        self.requests.pop(req.rid, None)

