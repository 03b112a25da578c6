"""One admitted request as its caller sees it: stream its chunks, await its result, append input, cancel it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..context import QUEUE_WAIT
from ..errors import AppendRefused, RequestCancelled
from .requests import END, Inflight, RequestTable


class RequestHandle:
    """One admitted request: stream its output chunks, await its result, or cancel it."""

    def __init__(self, table: RequestTable, inflight: Inflight,
                 appender: Callable[[Inflight, Any, bool], Awaitable[None]] | None = None) -> None:
        self._table = table
        self._inflight = inflight
        self.request_id = inflight.rid
        self._appender = appender
        self.input_closed = False
        """``append(..., final=True)`` or ``close_input()`` was called: the request's input is complete."""

    @property
    def binding(self) -> dict[str, int]:
        """Replica index chosen per replicated process group at admission."""
        return dict(self._inflight.binding)

    @property
    def instances(self) -> frozenset[str]:
        """The process instances this request is bound to."""
        return self._inflight.instances

    @property
    def stage_timings(self) -> dict[str, float]:
        """Seconds spent in each stage; filled when the request finishes (also on failure, for stages that finished)."""
        return {stage: s for stage, s in self._inflight.timings.items() if not stage.startswith(QUEUE_WAIT)}

    @property
    def queue_waits(self) -> dict[str, float]:
        """Seconds the request waited in each batching stage's queue before its first step (stage -> seconds)."""
        return {key[len(QUEUE_WAIT):]: s for key, s in self._inflight.timings.items() if key.startswith(QUEUE_WAIT)}

    @property
    def done(self) -> bool:
        return self._inflight.future.done()

    async def stream(self) -> AsyncIterator[Any]:
        """The terminal stage's emitted chunks, in order; ends when the request completes.

        Raises :class:`RequestFailed` if the request fails. Single consumer.
        """
        while True:
            item = await self._inflight.chunks.get()
            if item is END:
                self._inflight.chunks.put_nowait(END)  # a second stream() ends at once
                if self._inflight.future.done() and self._inflight.future.exception() is not None:
                    raise self._inflight.future.exception()  # type: ignore[misc]
                return
            origin, chunk = item
            self._table.chunk_taken(self._inflight, origin)
            yield chunk

    async def result(self) -> dict[str, Any]:
        """The terminal payload's ``data``; raises :class:`RequestFailed`.

        Awaiting only the result (no :meth:`stream`) lets the output chunks
        pile up here instead of holding the terminal stage back.
        """
        if not self._inflight.auto_credit:
            self._table.credit_on_arrival(self._inflight)
        return await asyncio.shield(self._inflight.future)

    async def cancel(self) -> None:
        """Abort the request in every stage of every process it is bound to."""
        await self._table.cancel(self._inflight, RequestCancelled())

    async def append(self, data: Any, *, final: bool = False) -> None:
        """Send more input to the running request (its entry stage's ``append`` hook, docs/stage-contract.md).

        ``final``: the input is complete after ``data`` (``data`` may then be None). Pieces reach
        the stage in the order they were appended, after the entry payload. Raises
        :class:`~omni_runtime.errors.AppendRefused` (nothing sent) when the model's entry stage
        takes no appended input, the request already ended, or its input was closed.
        """
        if self._appender is None:
            raise AppendRefused("this handle's runtime cannot append input", reason="not_supported")
        if self.input_closed:
            raise AppendRefused(f"request {self.request_id}: its input was closed; start a new request", reason="input_closed")
        if self._inflight.future.done():
            raise AppendRefused(f"request {self.request_id} has finished; its input can no longer grow", reason="finished")
        if final:
            self.input_closed = True
        await self._appender(self._inflight, data, final)

    async def close_input(self) -> None:
        """The request's input is complete (``append(None, final=True)``); a no-op once closed or finished."""
        if not self.input_closed and not self._inflight.future.done():
            await self.append(None, final=True)
