"""What a stage sees about the request it is processing (docs/stage-contract.md).

Only logical names appear here: ``process_name`` is the declared process, never
a replica (``vocoder@r1``) or TP-rank (``engine_tp1``) name, so stage code
behaves the same however the deployment places it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .payload import StagePayload

QUEUE_WAIT = "queue_wait:"
"""Prefix of the stage-timing keys that carry a stage's queue wait (``queue_wait:<stage>``): they
travel to the parent with the stage timings and reach ``/metrics`` as
``omni_stage_queue_wait_seconds``; ``RequestHandle.stage_timings`` leaves them out."""


class StageContext:
    """Per-request, per-stage handle passed to ``process`` and ``consume``."""

    __slots__ = (
        "_aemit", "_cancel_event", "_loop", "_timings", "deadline", "device", "process_name", "request_id", "stage_name", "tp_rank", "tp_size", "upstream_payload",
    )

    def __init__(
        self,
        *,
        request_id: str,
        stage_name: str,
        process_name: str,
        device: str,
        tp_rank: int | None,
        tp_size: int,
        cancel_event: asyncio.Event,
        aemit: Callable[[Any], Awaitable[None]],
        loop: asyncio.AbstractEventLoop,
        deadline: float | None = None,
        timings: dict[str, float] | None = None,
    ) -> None:
        self.request_id = request_id
        self.stage_name = stage_name
        self.process_name = process_name
        self.device = device
        self.tp_rank = tp_rank
        self.tp_size = tp_size
        self.deadline = deadline
        """The request's deadline as a ``time.monotonic()`` instant (None: it has none); work past it is wasted:
        the runtime cancels the request there, and a batching scheduler drops it from its batch."""
        self.upstream_payload: StagePayload | None = None
        """The streaming producer's final payload, set once ``consume``'s iterator has ended."""
        self._cancel_event = cancel_event
        self._aemit = aemit
        self._loop = loop
        self._timings = timings

    def record_queue_wait(self, seconds: float) -> None:
        """Report how long this request waited in the stage's own queue (a batching engine's
        scheduler) before its first step. The runtime carries it with the stage timings to the
        server's ``/metrics`` (``omni_stage_queue_wait_seconds{model,stage,replica}``); callable
        from any thread, the first report per stage counts."""
        if self._timings is not None and seconds >= 0:
            self._timings.setdefault(QUEUE_WAIT + self.stage_name, float(seconds))

    @property
    def cancelled(self) -> bool:
        """True once the request was cancelled or failed elsewhere; long loops should stop."""
        return self._cancel_event.is_set()

    async def aemit(self, chunk: Any) -> None:
        """Send one chunk to every ``stream_to`` target (and to the client for a terminal stage), in order.

        Awaiting it applies back-pressure: it returns once the chunk is handed to
        each target's queue or socket.
        """
        await self._aemit(chunk)

    def emit(self, chunk: Any) -> None:
        """Blocking form of :meth:`aemit` for sync stages running in a worker thread."""
        if _running_loop() is self._loop:
            raise RuntimeError(
                f"stage {self.stage_name}: ctx.emit() was called on the event loop; an async stage must use 'await ctx.aemit(chunk)'"
            )
        asyncio.run_coroutine_threadsafe(self._aemit(chunk), self._loop).result()

    def __repr__(self) -> str:
        return f"StageContext(request_id={self.request_id!r}, stage_name={self.stage_name!r}, process_name={self.process_name!r}, device={self.device!r})"


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
