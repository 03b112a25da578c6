"""Credit-based flow control for streamed chunks that cross a process boundary.

Per request and edge (producer stage -> one consumer instance), the producer
may have at most :data:`CHUNK_WINDOW` chunks sent and not yet taken by the
consumer. Each chunk spends one credit; with none left, the producer's
``emit`` waits. The consumer gives credit back in batches of
:data:`CREDIT_BATCH` as its stage takes chunks, so a fast producer runs at
the consumer's pace and the memory held for one stream is bounded by the
window, whatever the speeds. Inside one process the consumer's bounded queue
does the same job without messages.
"""

from __future__ import annotations

import asyncio
from collections import deque

from .errors import RequestCancelled

CHUNK_WINDOW = 16
"""Chunks a producer may have in flight to one consumer instance per request."""
CREDIT_BATCH = 4
"""Chunks a consumer takes before it returns that many credits (fewer messages, same bound)."""


class CreditGate:
    """The producer's side of one (request, consumer instance) edge: spend a credit per chunk."""

    __slots__ = ("_aborted", "_credits", "_loop", "_waiters")

    def __init__(self, loop: asyncio.AbstractEventLoop, credits: int = CHUNK_WINDOW) -> None:
        self._loop = loop
        self._credits = credits
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._aborted: BaseException | None = None

    @property
    def credits(self) -> int:
        return self._credits

    async def acquire(self) -> None:
        """Spend one credit, waiting while there is none; raises once the request was aborted."""
        while self._credits <= 0 and self._aborted is None:
            fut = self._loop.create_future()
            self._waiters.append(fut)
            try:
                await fut
            finally:
                if fut in self._waiters:
                    self._waiters.remove(fut)
        if self._aborted is not None:
            raise self._aborted
        self._credits -= 1

    def grant(self, count: int) -> None:
        """The consumer took ``count`` chunks."""
        self._credits += count
        while self._waiters and self._credits > 0:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)

    def abort(self, error: BaseException | None = None) -> None:
        self._aborted = error or RequestCancelled()
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)


class CreditReturn:
    """The consumer's side: count chunks taken per producer instance, say when to return credit."""

    __slots__ = ("_taken",)

    def __init__(self) -> None:
        self._taken: dict[str, int] = {}

    def took(self, origin: str) -> int:
        """One chunk from ``origin`` was taken; returns the credits to send now (0: not yet)."""
        count = self._taken.get(origin, 0) + 1
        if count >= CREDIT_BATCH:
            self._taken[origin] = 0
            return count
        self._taken[origin] = count
        return 0
