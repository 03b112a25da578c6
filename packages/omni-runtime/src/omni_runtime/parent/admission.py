"""Admitting a request: the in-flight bound, its deadline, and a binding to live processes.

``submit`` refuses at once past ``max_inflight`` (:class:`Overloaded`, HTTP
429): queueing more work than the pipeline drains only turns a burst into
timeouts. A request is bound to one ready replica per replicated process; a
process that is restarting is waited for, up to the request's deadline,
instead of failing the request at once; a process that is down for good (its
restart budget spent) fails it at once.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from .. import envelope as E
from ..errors import Overloaded, RequestFailed, RuntimeNotRunning
from ..supervision import DEAD, READY, STOPPED
from .handle import Inflight, RequestHandle
from .state import ParentState

_DOWN = (DEAD, STOPPED)


class Admission(ParentState):
    async def submit(self, data: dict[str, Any], *, timeout: float | None = None) -> RequestHandle:
        """Admit one request with the entry payload ``data``; returns once its entry payload is sent.

        ``timeout``: seconds until the request's deadline (default: the
        runtime's ``request_timeout``); past it the request fails with
        ``kind="deadline"`` and is cancelled in every stage.
        """
        if not self._accepting:
            if self._shutting_down:
                raise RuntimeNotRunning("the runtime is shutting down and admits no new requests")
            raise RuntimeNotRunning("the runtime is not accepting requests (not started, stopping or stopped)")
        if self.max_inflight is not None and len(self._inflight) + self._admitting >= self.max_inflight:
            raise Overloaded(f"{self.max_inflight} requests are in flight (max_inflight); retry shortly")
        seconds = self.request_timeout if timeout is None else timeout
        deadline = time.time() + seconds
        self._admitting += 1
        try:
            binding, instances = await self._bind(deadline, seconds)
        finally:
            self._admitting -= 1
        assert self._loop is not None and self._plane is not None
        rid = uuid.uuid4().hex
        req = Inflight(rid, binding, instances, self._loop.create_future(), asyncio.Queue(), submitted=time.perf_counter(), deadline=deadline)
        self._inflight[rid] = req
        for name in instances:
            self._load[name] += 1
        req.expiry = self._loop.call_later(max(deadline - time.time(), 0.0), self._expire, req, seconds)
        header = E.header(E.RUN, rid=rid, stage=self.topology.entry_stage, binding=binding, has_data=True, deadline=deadline)
        try:
            for target in self.router.targets(self.topology.entry_stage, binding):
                # timeout=None keeps the send on pyzmq's non-blocking fast path (no poll per request);
                # wait_for still bounds it if the worker died before its exit was noticed
                await asyncio.wait_for(self._plane.outbox(target.instance).send(header, data, timeout=None), self.send_timeout)
        except BaseException as exc:
            self._finish(req, error=RequestFailed(f"could not admit the request: {exc}", kind="unavailable"))
            await self._broadcast_cancel(req)
            raise req.future.exception() from exc  # type: ignore[misc]
        return RequestHandle(self, req)  # type: ignore[arg-type]

    def _expire(self, req: Inflight, seconds: float) -> None:
        if req.future.done() or self._loop is None:
            return
        error = RequestFailed(f"the request did not finish within its deadline of {seconds:g} s; it was cancelled in every stage", kind="deadline")
        self._loop.create_task(self._cancel(req, error))

    async def _bind(self, deadline: float, seconds: float) -> tuple[dict[str, int], frozenset[str]]:
        """A binding whose every instance is ready, waiting for restarting ones up to ``deadline``."""
        while True:
            changed = self._changed
            ready = {name: self._state_of(name) == READY for name in self._load}
            binding = self.chooser.choose(self._load, ready)
            if binding is not None:
                instances = frozenset(self.router.instances_of_binding(binding))
                down = sorted(n for n in instances if self._state_of(n) in _DOWN)
                if down:
                    raise RequestFailed(f"process {', '.join(down)} is not running; see health()", kind="unavailable")
                if all(ready[n] for n in instances):
                    return binding, instances
            else:
                self._raise_if_no_replica_can_return()
            remaining = deadline - time.time()
            if remaining <= 0:
                raise RequestFailed(f"no process to run the request became ready within its deadline of {seconds:g} s", kind="deadline")
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except asyncio.TimeoutError:
                continue

    def _raise_if_no_replica_can_return(self) -> None:
        for group in self.router.replicated_groups:
            replicas = self.chooser.group_members(group)
            if all(any(self._state_of(n) in _DOWN for n in members) for members in replicas):
                raise RequestFailed("no live replica is left for a replicated process; see health()", kind="unavailable")
