"""Adapt whatever a factory returned to one calling convention.

The contract allows an object with ``process`` (sync or async, with or without
``ctx``), a plain callable of the same shape, and an optional ``consume`` for
streaming consumers. The adapter decides once, at build time, how to call it,
so the hot path does no introspection.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Executor
from typing import Any

from ..context import StageContext
from ..payload import StagePayload


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return True
    # a callable object whose __call__ is async (a stage class instance)
    return callable(fn) and inspect.iscoroutinefunction(type(fn).__call__)


def _takes_ctx(fn: Callable[..., Any], positional_needed: int) -> bool:
    """Whether ``fn`` accepts one more positional argument than ``positional_needed - 1``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    count = 0
    for p in params:
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            return True
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            count += 1
    return count >= positional_needed


class StageAdapter:
    """A built stage with its calling convention resolved."""

    def __init__(self, name: str, obj: Any) -> None:
        self.name = name
        self.obj = obj
        process = getattr(obj, "process", None)
        if process is not None and not callable(process):
            raise TypeError(f"stage {name}: 'process' attribute of {type(obj).__name__} is not callable")
        if process is None and callable(obj) and not inspect.isclass(obj):
            process = obj
        self._process = process
        self.process_async = process is not None and _is_async(process)
        self._process_ctx = process is not None and _takes_ctx(process, 2)
        consume = getattr(obj, "consume", None)
        if consume is not None and not callable(consume):
            raise TypeError(f"stage {name}: 'consume' attribute of {type(obj).__name__} is not callable")
        self._consume = consume
        self.consume_async = consume is not None and _is_async(consume)
        if process is None and consume is None:
            raise TypeError(
                f"stage {name}: the factory returned {type(obj).__name__}, which has neither process(payload, ctx) nor consume(chunks, ctx) "
                "and is not callable; return an object with a process method or a plain callable (docs/stage-contract.md)"
            )

    @property
    def can_process(self) -> bool:
        return self._process is not None

    @property
    def can_consume(self) -> bool:
        return self._consume is not None

    async def process(self, payload: StagePayload, ctx: StageContext, executor: Executor) -> Any:
        fn = self._process
        assert fn is not None
        args = (payload, ctx) if self._process_ctx else (payload,)
        if self.process_async:
            return await fn(*args)
        return await asyncio.get_running_loop().run_in_executor(executor, contextvars.copy_context().run, fn, *args)

    async def consume(self, async_chunks: AsyncIterator[Any], sync_chunks: Callable[[], Iterator[Any]], ctx: StageContext, executor: Executor) -> Any:
        fn = self._consume
        assert fn is not None
        if self.consume_async:
            return await fn(async_chunks, ctx)
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(executor, lambda: context.run(fn, sync_chunks(), ctx))


def as_payload(stage: str, request_id: str, value: Any) -> StagePayload:
    """Validate a stage's return value: a StagePayload (a plain dict is wrapped)."""
    if isinstance(value, StagePayload):
        return value
    if isinstance(value, dict):
        return StagePayload(request_id, value)
    raise TypeError(f"stage {stage} returned {type(value).__name__}; a stage must return a StagePayload (or a dict of data)")
