"""What the parent knows while it runs: its topology, its workers, and the requests in flight.

:class:`~omni_runtime.parent.runtime.Runtime` is assembled from its lifecycle
(:mod:`.runtime`), its admission of requests (:mod:`.admission`) and its
handling of what workers send (:mod:`.inbound`); the attributes they
share are declared here once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from omni_compiler.topology import CompiledTopology

from .. import envelope as E
from ..errors import RequestFailed
from ..routing import ReplicaChooser, Router
from ..supervision import READY, Supervisor
from ..worker import WorkerOptions
from .handle import END, Inflight

if TYPE_CHECKING:
    from ..plane import Plane

log = logging.getLogger("omni.runtime")


class ParentState:
    """The attributes the parent's sides share, and the request bookkeeping they all use."""

    topology: CompiledTopology
    router: Router
    chooser: ReplicaChooser
    options: WorkerOptions
    supervisor: Supervisor | None
    request_timeout: float
    max_inflight: int | None
    send_timeout: float
    log: Callable[[str], Any]
    _plane: Plane | None
    _inflight: dict[str, Inflight]
    _load: dict[str, int]
    _admitting: int
    _accepting: bool
    _started: bool
    _shutting_down: bool
    _loop: asyncio.AbstractEventLoop | None
    _changed: asyncio.Event

    def _state_of(self, name: str) -> str:
        return self.supervisor.instances[name].state if self.supervisor is not None else "starting"

    def _notify_change(self) -> None:
        """An instance changed state: wake every admission waiting for one."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _finish(self, req: Inflight, result: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
        if req.future.done():
            return
        if req.expiry is not None:
            req.expiry.cancel()
            req.expiry = None
        if self._inflight.pop(req.rid, None) is not None:
            for name in req.instances:
                self._load[name] -= 1
        if error is not None:
            req.future.set_exception(error)
            req.future.exception()  # retrieved: a caller that only streams must not trigger "never retrieved"
        else:
            req.future.set_result(result or {})
        req.chunks.put_nowait(END)

    async def _cancel(self, req: Inflight, error: RequestFailed) -> None:
        if req.future.done():
            return
        self._finish(req, error=error)
        await self._broadcast_cancel(req)

    async def _broadcast_cancel(self, req: Inflight, skip: str | None = None) -> None:
        header = E.header(E.CANCEL, rid=req.rid)
        for name in req.instances:
            if name == skip or self._plane is None or self.supervisor is None or self._state_of(name) != READY:
                continue
            with contextlib.suppress(Exception):
                await self._plane.outbox(name).send(header, timeout=1.0)

    async def _send_quietly(self, name: str, header: dict[str, Any], timeout: float = 1.0) -> None:
        if self._plane is None:
            return
        with contextlib.suppress(Exception):
            await self._plane.outbox(name).send(header, timeout=timeout)

    # -- output credit (the terminal stage -> parent edge) ----------------------
    def _chunk_taken(self, req: Inflight, origin: str) -> None:
        """A caller took one output chunk of ``req`` from ``origin``: return credit in batches."""
        req.untaken[origin] -= 1
        count = req.credits.took(origin)
        if count and not req.future.done() and self._loop is not None:
            self._loop.create_task(self._send_quietly(origin, E.header(E.CREDIT, rid=req.rid, stage=E.OUTPUT, instance=E.PARENT, count=count)))

    def _credit_on_arrival(self, req: Inflight) -> None:
        """Only the result is awaited: let the terminal stage run free (its chunks collect here)."""
        req.auto_credit = True
        for origin, count in list(req.untaken.items()):
            if count > 0 and self._loop is not None:
                self._loop.create_task(self._send_quietly(origin, E.header(E.CREDIT, rid=req.rid, stage=E.OUTPUT, instance=E.PARENT, count=count)))
        req.untaken.clear()
