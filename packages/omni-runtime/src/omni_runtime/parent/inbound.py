"""What the parent does with the messages workers send, and with a worker's death.

Results, errors and streamed output complete or feed the caller's request;
``ready`` and ``startup_error`` drive the supervisor; ``term`` (a worker got
SIGTERM) is either part of the server's own shutdown or a request to restart
that one worker. A worker's death fails, at once, every request in flight that
is bound to it, and the run's owner takes back what the dead process held:
the segments it sent (its own, removed) and the ones sent to it that it never
claimed (reclaimed by every sender).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .. import envelope as E
from ..errors import RequestFailed, StartupError
from ..launch import ExitInfo
from ..supervision import READY, Instance
from .state import ParentState

log = logging.getLogger("omni.runtime")

TERM_SETTLE_S = 0.5
"""How long a worker's SIGTERM report waits to see whether the parent got SIGTERM too (a group stop)."""
TERM_DRAIN_S = 30.0
"""How long a worker stopped by its own SIGTERM gets to finish the requests it already has."""


class ParentInbound(ParentState):
    _startup: asyncio.Future[None] | None
    _ray: Any
    run: Any

    async def _receive(self) -> None:
        assert self._plane is not None
        inbox = self._plane.inbox
        while True:
            try:
                batch = await inbox.recv_batch()  # every queued message at once: no await per message
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a malformed message must not stop the parent
                log.warning("dropped a malformed message: %s", exc)
                continue
            for msg in batch:
                try:
                    await self._dispatch(msg)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - one bad message must not stop every request
                    log.error("error while handling a %r message: %s: %s", msg.header.get(E.KIND), type(exc).__name__, exc)
            # Let the callers whose requests this batch completed resume before this loop
            # sets up its next wait (same loop iteration, but their result comes first).
            await asyncio.sleep(0)

    async def _dispatch(self, msg: Any) -> None:
        """Handle one message from a worker (runs on the parent's receive loop)."""
        h = msg.header
        kind = h[E.KIND]
        if kind == E.READY:
            endpoint = msg.payload() if h.get(E.HAS_DATA) else None  # where a worker on another node listens
            if self._ray is not None:
                await self._ray.ready(h[E.SRC], endpoint)
            self._on_ready(h[E.SRC])
            return
        if kind == E.STARTUP_ERROR:
            tb = msg.payload() if h.get(E.HAS_DATA) else ""
            self._on_startup_error(h[E.SRC], h.get(E.STAGE) or None, tb)
            return
        if kind == E.TERM:
            msg.discard()
            self._on_term(h.get(E.SRC, ""))
            return
        req = self._inflight.get(h.get(E.RID, ""))
        if req is None:
            msg.discard()
            return
        try:
            data = (await msg.payload_async()) if h.get(E.HAS_DATA) else None
        except Exception as exc:  # noqa: BLE001 - an undecodable result fails its request
            msg.discard()
            self._finish(req, error=RequestFailed(f"could not decode a message for the request: {exc}"))
            await self._broadcast_cancel(req)
            return
        if kind == E.OUT:
            origin = h.get(E.INSTANCE, "")
            req.chunks.put_nowait((origin, data))
            if req.auto_credit:
                count = req.credits.took(origin)
                if count:
                    await self._send_quietly(origin, E.header(E.CREDIT, rid=req.rid, stage=E.OUTPUT, instance=E.PARENT, count=count))
            else:
                req.untaken[origin] += 1
        elif kind == E.RESULT:
            req.timings.update(h.get(E.TIMINGS, {}))
            self._finish(req, result=data)
        elif kind == E.ERROR:
            req.timings.update(h.get(E.TIMINGS, {}))
            stage = h.get(E.STAGE, "")
            process = self.router.stages[stage].process if stage in self.router.stages else None
            error = RequestFailed(h.get(E.TEXT, "stage failed"), stage=stage or None, process=process)
            if E.PARAM in h:
                error.kind, error.param = "invalid_request", str(h[E.PARAM])
            error.detail = data if isinstance(data, str) else ""
            self._finish(req, error=error)
            await self._broadcast_cancel(req, skip=h.get(E.SRC))

    def _on_ready(self, name: str) -> None:
        assert self.supervisor is not None
        self.supervisor.on_ready(name)
        states = [inst.state for inst in self.supervisor.instances.values()]
        if all(state == READY for state in states) and self._startup is not None and not self._startup.done():
            self._startup.set_result(None)

    def _on_startup_error(self, name: str, stage: str | None, tb: str) -> None:
        assert self.supervisor is not None
        self.supervisor.on_startup_error(name, stage, tb)
        if self._startup is not None and not self._startup.done():
            self._startup.set_exception(StartupError(stage, name, tb))

    def _on_term(self, name: str) -> None:
        if self._shutting_down or self._loop is None or self.supervisor is None:
            log.info("process %s got SIGTERM while the server drains: it stops with the others", name)
            return
        self._loop.call_later(TERM_SETTLE_S, self._term_settled, name)

    def _term_settled(self, name: str) -> None:
        assert self.supervisor is not None and self._loop is not None
        if self._shutting_down:
            log.info("process %s got SIGTERM while the server drains: it stops with the others", name)
            return
        inst = self.supervisor.instances.get(name)
        if inst is None or inst.worker is None:
            return
        log.warning("process %s got SIGTERM on its own: it takes no new requests, finishes its own, then stops", name)
        self.supervisor.on_term(name)
        self._loop.create_task(self._drain_one(name))

    async def _drain_one(self, name: str) -> None:
        """Stop one worker gracefully: no new requests for it, its own ones finish (or time out), then SHUTDOWN."""
        assert self._loop is not None
        deadline = self._loop.time() + TERM_DRAIN_S
        while self._load.get(name, 0) and self._loop.time() < deadline and not self._shutting_down:
            await asyncio.sleep(0.05)
        await self._send_quietly(name, E.header(E.SHUTDOWN))

    def _on_death(self, inst: Instance, info: ExitInfo) -> None:
        """A worker is gone: fail its requests now, and take back the shared memory it held."""
        assert self.supervisor is not None and self._loop is not None
        if not self.supervisor.restarting_enabled and self._startup is not None and not self._startup.done():
            detail = f"the process {info.describe()} before it was ready"
            self._startup.set_exception(StartupError(None, inst.name, "", reason=detail))
            return
        self._reclaim_after(inst, info)
        message = f"process {inst.name} {_describe(self.supervisor.reason(inst, info), info)} while the request was in flight"
        for req in [r for r in self._inflight.values() if inst.name in r.instances]:
            self._finish(req, error=RequestFailed(message, process=inst.name, kind="process_died"))
            self._loop.create_task(self._broadcast_cancel(req, skip=inst.name))

    def _reclaim_after(self, inst: Instance, info: ExitInfo) -> None:
        from ..transport import remove_sender_segments

        assert self._plane is not None and self.supervisor is not None and self._loop is not None
        self._plane.peer_died(inst.name)
        pid = inst.last_pid
        if pid is not None and self.run is not None:
            removed = remove_sender_segments(self.run.shm_prefix, pid)
            if removed:
                log.info("removed %d shared-memory segment(s) process %s left behind", len(removed), inst.name)
        header = E.header(E.PEER_DIED, src=inst.name)
        for other in self.supervisor.instances.values():
            if other.name != inst.name and other.state == READY:
                self._loop.create_task(self._send_quietly(other.name, header))


def _describe(reason: str, info: ExitInfo) -> str:
    if reason == "SIGTERM":
        return "stopped after SIGTERM"
    return info.describe()

