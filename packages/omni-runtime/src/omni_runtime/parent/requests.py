"""The parent's request table: every request in flight, its load on each instance, and how it ends.

One place finishes a request (result or error, exactly once), cancels it in
every process it is bound to, and returns the output credit of its terminal
stage. Admission adds requests; the result router and the handles finish and
credit them; nothing else touches the table's dictionaries.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import envelope as E
from ..control import ControlSender
from ..errors import RequestFailed
from ..flow import CreditReturn

END = object()
"""Queued after a request's last output chunk."""


@dataclass
class Inflight:
    """The parent's record of one request in flight: where it runs and how to complete it."""

    rid: str
    binding: dict[str, int]
    instances: frozenset[str]
    future: asyncio.Future[dict[str, Any]]
    chunks: asyncio.Queue[Any]
    """``(origin instance, chunk)`` pairs of the terminal stage's output, then :data:`END`."""
    timings: dict[str, float] = field(default_factory=dict)
    submitted: float = 0.0
    deadline: float | None = None
    """Monotonic seconds; the request fails and is cancelled everywhere once it passes."""
    expiry: asyncio.TimerHandle | None = None
    credits: CreditReturn = field(default_factory=CreditReturn)
    untaken: Counter[str] = field(default_factory=Counter)
    """Output chunks received per origin instance that no stream() took yet (their credit is still out)."""
    auto_credit: bool = False
    """Nobody streams (only ``result()`` is awaited): give credit back on arrival."""


class RequestTable:
    """Requests in flight by id, and how many are bound to each process instance."""

    def __init__(self, instances: Iterable[str], control: ControlSender, is_ready: Callable[[str], bool]) -> None:
        self.inflight: dict[str, Inflight] = {}
        self.load: dict[str, int] = dict.fromkeys(instances, 0)
        self.admitting = 0
        """Requests being admitted (counted against ``max_inflight`` before they are in the table)."""
        self._control = control
        self._is_ready = is_ready
        self.loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self.inflight)

    def get(self, rid: str) -> Inflight | None:
        return self.inflight.get(rid)

    def add(self, req: Inflight) -> None:
        self.inflight[req.rid] = req
        for name in req.instances:
            self.load[name] += 1

    def bound_to(self, instance: str) -> list[Inflight]:
        return [r for r in self.inflight.values() if instance in r.instances]

    def finish(self, req: Inflight, result: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
        """Complete ``req`` once (later calls do nothing): its result or error, then the end of its chunks."""
        if req.future.done():
            return
        if req.expiry is not None:
            req.expiry.cancel()
            req.expiry = None
        if self.inflight.pop(req.rid, None) is not None:
            for name in req.instances:
                self.load[name] -= 1
        if error is not None:
            req.future.set_exception(error)
            req.future.exception()  # retrieved: a caller that only streams must not trigger "never retrieved"
        else:
            req.future.set_result(result or {})
        req.chunks.put_nowait(END)

    async def cancel(self, req: Inflight, error: RequestFailed | BaseException) -> None:
        """Fail ``req`` with ``error`` and stop it in every process it is bound to."""
        if req.future.done():
            return
        self.finish(req, error=error)
        await self.broadcast_cancel(req)

    async def broadcast_cancel(self, req: Inflight, skip: str | None = None) -> None:
        header = E.header(E.CANCEL, rid=req.rid)
        for name in req.instances:
            if name != skip and self._is_ready(name):
                await self._control.send(name, header)

    # -- output credit (the terminal stage -> parent edge) ----------------------
    def chunk_taken(self, req: Inflight, origin: str) -> None:
        """A caller took one output chunk of ``req`` from ``origin``: return credit in batches."""
        req.untaken[origin] -= 1
        count = req.credits.took(origin)
        if count and not req.future.done():
            self._give_credit(req, origin, count)

    def chunk_arrived(self, req: Inflight, origin: str) -> None:
        """An output chunk from ``origin`` was queued for ``req``'s caller."""
        if req.auto_credit:
            count = req.credits.took(origin)
            if count:
                self._give_credit(req, origin, count)
        else:
            req.untaken[origin] += 1

    def credit_on_arrival(self, req: Inflight) -> None:
        """Only the result is awaited: let the terminal stage run free (its chunks collect here)."""
        req.auto_credit = True
        for origin, count in list(req.untaken.items()):
            if count > 0:
                self._give_credit(req, origin, count)
        req.untaken.clear()

    def _give_credit(self, req: Inflight, origin: str, count: int) -> None:
        if self.loop is None:
            return
        header = E.header(E.CREDIT, rid=req.rid, stage=E.OUTPUT, instance=E.PARENT, count=count)
        self.loop.create_task(self._control.send(origin, header))
