"""What the parent does with the messages workers send, and with a worker's death.

Results, errors and streamed output complete or feed the caller's request;
``ready`` (with the endpoint a worker listens on, for the backend) and
``startup_error`` drive the supervisor; ``term`` (a worker got SIGTERM) is
either part of the server's own shutdown or a request to restart that one
worker. A worker's death fails, at once, every request in flight that is bound
to it, and the run's owner takes back what the dead process held: the
segments it sent (its own, removed) and the ones sent to it that it never
claimed (reclaimed by every sender).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import envelope as E
from ..control import ControlSender, add_reported
from ..errors import RequestFailed, StageConfigError, StartupError
from ..launch import Backend, ExitInfo
from ..routing import Router
from ..supervision import READY, HeartbeatWatch, Instance, Supervisor
from ..supervision.supervisor import silent_words
from .reports import StageReports
from .requests import RequestTable

log = logging.getLogger("omni.runtime")

TERM_SETTLE_S = 0.5
"""How long a worker's SIGTERM report waits to see whether the parent got SIGTERM too (a group stop)."""
TERM_DRAIN_S = 30.0
"""How long a worker stopped by its own SIGTERM gets to finish the requests it already has."""


@dataclass(eq=False)
class ResultRouter:
    """The parent's receive loop: worker messages to requests, supervisor events, deaths.

    Built with the parts it uses; the run's own pieces (supervisor, plane, loop, the
    start-up future, the heartbeat watch) are set by the runtime as the run opens.
    """

    table: RequestTable
    router: Router
    control: ControlSender
    backend: Backend
    _stopping: Callable[[], bool]
    supervisor: Supervisor | None = None
    plane: Any = None
    shm_prefix: str | None = None
    startup: asyncio.Future[None] | None = None
    loop: asyncio.AbstractEventLoop | None = None
    heartbeats: HeartbeatWatch | None = None
    reports: StageReports = field(default_factory=StageReports)
    """What each worker said about its stages at ready (voices, limits, append)."""
    worker_control_failures: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """Control messages workers could not send, by (sending instance, kind, peer), from their heartbeats."""

    async def receive(self) -> None:
        assert self.plane is not None
        inbox = self.plane.inbox
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
                    await self.dispatch(msg)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - one bad message must not stop every request
                    log.error("error while handling a %r message: %s: %s", msg.header.get(E.KIND), type(exc).__name__, exc)
            # Let the callers whose requests this batch completed resume before this loop
            # sets up its next wait (same loop iteration, but their result comes first).
            await asyncio.sleep(0)

    async def dispatch(self, msg: Any) -> None:
        """Handle one message from a worker (runs on the parent's receive loop)."""
        h = msg.header
        kind = h[E.KIND]
        if kind == E.READY:
            report = msg.payload() if h.get(E.HAS_DATA) else None
            report = report if isinstance(report, dict) else {}
            self.reports.take(report)
            # where a worker on another node listens (None on one host)
            await self.backend.ready(h[E.SRC], report.get("endpoint"), self.control.send)
            self.on_ready(h[E.SRC])
            return
        if kind == E.STARTUP_ERROR:
            report = msg.payload() if h.get(E.HAS_DATA) else ""
            config = report.get("config") if isinstance(report, dict) else None
            if isinstance(config, dict):  # a factory refused a value: the user's mistake, no traceback
                self.on_startup_error(h[E.SRC], h.get(E.STAGE) or None, "", StageConfigError.from_dict(config))
            else:
                self.on_startup_error(h[E.SRC], h.get(E.STAGE) or None, report if isinstance(report, str) else "")
            return
        if kind == E.HEARTBEAT:
            if h.get(E.HAS_DATA):
                add_reported(self.worker_control_failures, str(h.get(E.SRC, "")), msg.payload())
            else:
                msg.discard()
            if self.heartbeats is not None:
                self.heartbeats.beat(h.get(E.SRC, ""))
            return
        if kind == E.TERM:
            msg.discard()
            self.on_term(h.get(E.SRC, ""))
            return
        req = self.table.get(h.get(E.RID, ""))
        if req is None:
            msg.discard()
            return
        try:
            data = (await msg.payload_async()) if h.get(E.HAS_DATA) else None
        except Exception as exc:  # noqa: BLE001 - an undecodable result fails its request
            msg.discard()
            self.table.finish(req, error=RequestFailed(f"could not decode a message for the request: {exc}"))
            await self.table.broadcast_cancel(req)
            return
        if kind == E.OUT:
            origin = h.get(E.INSTANCE, "")
            req.chunks.put_nowait((origin, data))
            self.table.chunk_arrived(req, origin)
        elif kind == E.RESULT:
            req.timings.update(h.get(E.TIMINGS, {}))
            self.table.finish(req, result=data)
        elif kind == E.ERROR:
            req.timings.update(h.get(E.TIMINGS, {}))
            stage = h.get(E.STAGE, "")
            process = self.router.stages[stage].process if stage in self.router.stages else None
            error = RequestFailed(h.get(E.TEXT, "stage failed"), stage=stage or None, process=process)
            if E.PARAM in h:
                error.kind, error.param = "invalid_request", str(h[E.PARAM])
            error.detail = data if isinstance(data, str) else ""
            self.table.finish(req, error=error)
            await self.table.broadcast_cancel(req, skip=h.get(E.SRC))

    def on_ready(self, name: str) -> None:
        assert self.supervisor is not None
        self.supervisor.on_ready(name)
        if self.heartbeats is not None:
            self.heartbeats.beat(name)
        states = [inst.state for inst in self.supervisor.instances.values()]
        if all(state == READY for state in states) and self.startup is not None and not self.startup.done():
            self.startup.set_result(None)

    def on_startup_error(self, name: str, stage: str | None, tb: str, config: StageConfigError | None = None) -> None:
        assert self.supervisor is not None
        self.supervisor.on_startup_error(name, stage, config.summary() if config is not None else tb)
        if self.startup is not None and not self.startup.done():
            self.startup.set_exception(StartupError.bad_value(stage, name, config) if config is not None else StartupError(stage, name, tb))

    # -- SIGTERM to one worker -------------------------------------------------
    def on_term(self, name: str) -> None:
        if self._stopping() or self.loop is None or self.supervisor is None:
            log.info("process %s got SIGTERM while the server drains: it stops with the others", name)
            return
        self.loop.call_later(TERM_SETTLE_S, self._term_settled, name)

    def _term_settled(self, name: str) -> None:
        assert self.supervisor is not None and self.loop is not None
        if self._stopping():
            log.info("process %s got SIGTERM while the server drains: it stops with the others", name)
            return
        inst = self.supervisor.instances.get(name)
        if inst is None or inst.worker is None:
            return
        log.warning("process %s got SIGTERM on its own: it takes no new requests, finishes its own, then stops", name)
        self.supervisor.on_term(name)
        self.loop.create_task(self._drain_one(name))

    async def _drain_one(self, name: str) -> None:
        """Stop one worker gracefully: no new requests for it, its own ones finish (or time out), then SHUTDOWN."""
        assert self.loop is not None
        deadline = self.loop.time() + TERM_DRAIN_S
        while self.table.load.get(name, 0) and self.loop.time() < deadline and not self._stopping():
            await asyncio.sleep(0.05)
        await self.control.send(name, E.header(E.SHUTDOWN))

    # -- a worker died ---------------------------------------------------------
    def on_death(self, inst: Instance, info: ExitInfo) -> None:
        """A worker is gone: fail its requests now, and take back the shared memory it held."""
        assert self.supervisor is not None and self.loop is not None
        if not self.supervisor.restarting_enabled and self.startup is not None and not self.startup.done():
            detail = f"the process {info.describe()} before it was ready"
            self.startup.set_exception(StartupError(None, inst.name, "", reason=detail))
            return
        self._reclaim_after(inst)
        message = f"process {inst.name} {_describe(inst, self.supervisor.reason(inst, info), info)} while the request was in flight"
        for req in self.table.bound_to(inst.name):
            self.table.finish(req, error=RequestFailed(message, process=inst.name, kind="process_died"))
            self.loop.create_task(self.table.broadcast_cancel(req, skip=inst.name))

    def _reclaim_after(self, inst: Instance) -> None:
        from ..transport import remove_sender_segments

        assert self.plane is not None and self.supervisor is not None and self.loop is not None
        self.plane.peer_died(inst.name)
        pid = inst.last_pid
        if pid is not None and self.shm_prefix is not None:
            removed = remove_sender_segments(self.shm_prefix, pid)
            if removed:
                log.info("removed %d shared-memory segment(s) process %s left behind", len(removed), inst.name)
        header = E.header(E.PEER_DIED, src=inst.name)
        for other in self.supervisor.instances.values():
            if other.name != inst.name and other.state == READY:
                self.loop.create_task(self.control.send(other.name, header))


def _describe(inst: Instance, reason: str, info: ExitInfo) -> str:
    if reason == "SIGTERM":
        return "stopped after SIGTERM"
    if inst.silent_for is not None:
        return silent_words(inst.silent_for)
    return info.describe()
