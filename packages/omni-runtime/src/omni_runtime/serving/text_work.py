"""CPU work a client's text causes, run off the serving event loop and within a budget per socket.

Every request head, ``/health`` probe, audio chunk and heartbeat of the server is handled on
one asyncio loop. Cutting a socket's text into sentences (pysbd) is pure-Python CPU work that
grows with the text a client chooses: run on the loop, one socket sending 4,096-character
deltas of ``"a. "`` kept ``/health`` from answering for 20 s. Here it runs in a small pool of
threads shared by every socket (:data:`TEXT_THREADS`), so the loop keeps turning, and each
socket has a CPU budget (:class:`CpuBudget`): a socket that spent more than its share waits
before its next message is read, which slows that client alone (its TCP window fills) and
bounds the pool's time any one socket can take from the others.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

TEXT_THREADS = 2
"""Threads segmenting text for every socket of the server (pysbd holds the GIL: more would only queue)."""
_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=TEXT_THREADS, thread_name_prefix="omni-text")
    return _POOL


def _timed(fn: Callable[..., T], *args: object) -> tuple[T, float]:
    start = time.thread_time()
    result = fn(*args)
    return result, time.thread_time() - start


class CpuBudget:
    """A token bucket of CPU seconds: ``share`` seconds of work per second of wall time, ``burst`` at most saved up.

    A socket starts with ``burst`` seconds; each piece of work spends what it cost its thread; when the
    balance is negative, the next piece waits until the refill has paid the debt back."""

    def __init__(self, share: float = 0.25, burst: float = 0.5) -> None:
        if share <= 0 or burst <= 0:
            raise ValueError(f"share and burst must be > 0 (got {share}, {burst})")
        self.share, self.burst = share, burst
        self._balance = burst
        self._at = time.monotonic()
        self.spent = 0.0
        """CPU seconds this socket's text cost so far."""
        self.waited = 0.0
        """Seconds this socket was held back for its budget."""

    def _refill(self) -> None:
        now = time.monotonic()
        self._balance = min(self.burst, self._balance + (now - self._at) * self.share)
        self._at = now

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in the text pool, after waiting out any debt of this budget."""
        self._refill()
        if self._balance < 0:
            pause = -self._balance / self.share
            self.waited += pause
            await asyncio.sleep(pause)
            self._refill()
        result, cost = await asyncio.get_running_loop().run_in_executor(_pool(), _timed, fn, *args)
        self._balance -= cost
        self.spent += cost
        return result
