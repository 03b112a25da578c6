"""Admitting a request: the in-flight bound, its deadline, and a binding to live processes.

``admit`` refuses at once past ``max_inflight`` (:class:`Overloaded`, HTTP
429): queueing more work than the pipeline drains only turns a burst into
timeouts. A request is bound to one ready replica per replicated process; a
process that is restarting is waited for, up to the request's deadline,
instead of failing the request at once; a process that is down for good (its
restart budget spent) fails it at once.

Deadlines are kept on the monotonic clock here (a wall-clock step must not
expire or extend a request); on the wire they travel as epoch seconds, the one
clock every host of a cluster shares, and each worker turns them back into
its own monotonic time.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

from .. import envelope as E
from ..errors import Overloaded, RequestFailed
from ..routing import ReplicaChooser, Router
from ..supervision import DEAD, READY, STOPPED
from .requests import Inflight, RequestTable
from .watch import InstanceWatch

_DOWN = (DEAD, STOPPED)


@dataclass(frozen=True)
class AdmissionLimits:
    """The operator's bounds on admission."""

    request_timeout: float
    max_inflight: int | None
    send_timeout: float


@dataclass(eq=False)
class Admission:
    """Admits requests into the table: bound, bind to ready replicas, send the entry payload (over ``plane``)."""

    table: RequestTable
    chooser: ReplicaChooser
    router: Router
    watch: InstanceWatch
    entry_stage: str
    limits: AdmissionLimits
    plane: Any = None

    async def admit(self, data: dict[str, Any], timeout: float | None, loop: asyncio.AbstractEventLoop) -> Inflight:
        """Admit one request with the entry payload ``data``; returns once its entry payload is sent."""
        limits = self.limits
        if limits.max_inflight is not None and len(self.table) + self.table.admitting >= limits.max_inflight:
            raise Overloaded(f"{limits.max_inflight} requests are in flight (max_inflight); retry shortly")
        seconds = limits.request_timeout if timeout is None else timeout
        deadline = time.monotonic() + seconds
        wall_deadline = time.time() + seconds
        self.table.admitting += 1
        try:
            binding, instances = await self._bind(deadline, seconds)
        finally:
            self.table.admitting -= 1
        assert self.plane is not None
        rid = uuid.uuid4().hex
        req = Inflight(rid, binding, instances, loop.create_future(), asyncio.Queue(), submitted=time.perf_counter(), deadline=deadline)
        self.table.add(req)
        req.expiry = loop.call_later(max(deadline - time.monotonic(), 0.0), self._expire, req, seconds, loop)
        header = E.header(E.RUN, rid=rid, stage=self.entry_stage, binding=binding, has_data=True, deadline=wall_deadline)
        try:
            for target in self.router.targets(self.entry_stage, binding):
                # timeout=None keeps the send on pyzmq's non-blocking fast path (no poll per request);
                # wait_for still bounds it if the worker died before its exit was noticed
                await asyncio.wait_for(self.plane.outbox(target.instance).send(header, data, timeout=None), limits.send_timeout)
        except BaseException as exc:
            self.table.finish(req, error=RequestFailed(f"could not admit the request: {exc}", kind="unavailable"))
            await self.table.broadcast_cancel(req)
            raise req.future.exception() from exc  # type: ignore[misc]
        return req

    def _expire(self, req: Inflight, seconds: float, loop: asyncio.AbstractEventLoop) -> None:
        if req.future.done():
            return
        error = RequestFailed(f"the request did not finish within its deadline of {seconds:g} s; it was cancelled in every stage", kind="deadline")
        loop.create_task(self.table.cancel(req, error))

    async def _bind(self, deadline: float, seconds: float) -> tuple[dict[str, int], frozenset[str]]:
        """A binding whose every instance is ready, waiting for restarting ones up to ``deadline``."""
        state_of = self.watch.state_of
        while True:
            ready = {name: state_of(name) == READY for name in self.table.load}
            binding = self.chooser.choose(self.table.load, ready)
            if binding is not None:
                instances = frozenset(self.router.instances_of_binding(binding))
                down = sorted(n for n in instances if state_of(n) in _DOWN)
                if down:
                    raise RequestFailed(f"process {', '.join(down)} is not running; see health()", kind="unavailable")
                if all(ready[n] for n in instances):
                    return binding, instances
            else:
                self._raise_if_no_replica_can_return()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RequestFailed(f"no process to run the request became ready within its deadline of {seconds:g} s", kind="deadline")
            await self.watch.wait_change(remaining)

    def _raise_if_no_replica_can_return(self) -> None:
        state_of = self.watch.state_of
        for group in self.router.replicated_groups:
            replicas = self.chooser.group_members(group)
            if all(any(state_of(n) in _DOWN for n in members) for members in replicas):
                raise RequestFailed("no live replica is left for a replicated process; see health()", kind="unavailable")
