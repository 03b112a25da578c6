"""The worker's request table: the requests in flight in this process, and those that just finished.

One place opens a request (its binding and its deadline timer), aborts it
(cancel flag, streams, credit gates, running tasks) and remembers that it
finished, so late messages for it are dropped (and their shared memory
released) instead of starting work nobody waits for.

Deadlines arrive as epoch seconds (the one clock every host of a cluster
shares) and are kept here, and given to stages as ``ctx.deadline``, on this
process's monotonic clock: a wall-clock step must not expire or extend them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Coroutine
from typing import Any

from ..errors import RequestCancelled
from .state import RequestState

log = logging.getLogger("omni.worker")

FINISHED_REMEMBERED = 10000
"""How many finished request ids are kept to drop their late messages."""


def monotonic_deadline(wall_deadline: float | None) -> float | None:
    """An epoch-seconds deadline from the wire as a ``time.monotonic()`` instant on this host."""
    if wall_deadline is None:
        return None
    return time.monotonic() + (float(wall_deadline) - time.time())


class WorkerRequests:
    """Requests in flight in this process by id; ``in`` tests an id."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.active: dict[str, RequestState] = {}
        self.finished: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, rid: object) -> bool:
        return rid in self.active

    def get(self, rid: str) -> RequestState | None:
        return self.active.get(rid)

    def open(self, rid: str, binding: dict[str, int], wall_deadline: float | None = None) -> RequestState:
        """The request ``rid`` here, created (with its deadline timer) on its first message."""
        req = self.active.get(rid)
        if req is None:
            deadline = monotonic_deadline(wall_deadline)
            req = self.active[rid] = RequestState(rid, dict(binding), asyncio.Event(), deadline=deadline, wall_deadline=wall_deadline)
            if deadline is not None:
                req.expiry = self.loop.call_later(max(deadline - time.monotonic(), 0.0), self._expire, req)
        return req

    def _expire(self, req: RequestState) -> None:
        """The request's deadline passed: stop its work here (the parent fails it for the client)."""
        if self.active.get(req.rid) is not req:
            return
        log.info("request %s passed its deadline: cancelled here", req.rid)
        self.mark_finished(req.rid)
        self.abort(req)

    def is_finished(self, rid: str) -> bool:
        return rid in self.finished

    def mark_finished(self, rid: str) -> None:
        self.finished[rid] = None
        while len(self.finished) > FINISHED_REMEMBERED:
            self.finished.popitem(last=False)

    def spawn(self, req: RequestState, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as one of ``req``'s tasks; the request leaves the table when its last task ends."""
        task = self.loop.create_task(coro)
        req.tasks.add(task)
        task.add_done_callback(lambda t: self._task_done(req, t))

    def _task_done(self, req: RequestState, task: asyncio.Task[Any]) -> None:
        req.tasks.discard(task)
        if not req.tasks and not req.parts and self.active.get(req.rid) is req:
            del self.active[req.rid]
            req.close()

    def abort(self, req: RequestState) -> None:
        """Stop ``req`` here: cancel flag, its streams and credit gates, every task but the caller's."""
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
        self.active.pop(req.rid, None)

    def abort_all(self) -> None:
        for req in list(self.active.values()):
            self.abort(req)
