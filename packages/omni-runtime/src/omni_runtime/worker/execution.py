"""A worker's execution side: run one stage for one request, and report its failure.

A stage runs as a task on the worker's event loop (``async def`` stages) or
in its stage's thread pool (``def`` stages). Any exception fails only that
request: the parent gets the message and the traceback, every other process
of the request is told to stop.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from typing import Any

from .. import envelope as E
from .. import logs
from ..context import StageContext
from ..errors import InvalidRequest, RequestCancelled
from ..payload import StagePayload
from .channel import ChunkChannel
from .stage import as_payload
from .state import RequestState, WorkerState

log = logging.getLogger("omni.worker")


class Execution(WorkerState):
    def _context(self, req: RequestState, stage: str) -> StageContext:
        placement = self.local[stage]
        return StageContext(
            request_id=req.rid,
            stage_name=stage,
            process_name=self.router.stages[stage].process,
            device=self.stages.devices[stage],
            tp_rank=placement.tp_rank,
            tp_size=placement.tp_size,
            cancel_event=req.cancel,
            aemit=lambda chunk: self._emit(req, stage, chunk),
            loop=self.loop,
        )

    async def _merge_and_run(self, req: RequestState, stage: str, parts: dict[str, StagePayload]) -> None:
        try:
            merged = as_payload(stage, req.rid, self.stages.merge_fns[stage](parts))
        except Exception as exc:  # noqa: BLE001 - a user merge_fn failure fails its request
            await self._fail(req, stage, exc, what="merge_fn")
            return
        await self._run_stage(req, stage, merged, None)

    async def _run_stage(self, req: RequestState, stage: str, payload: StagePayload | None, channel: ChunkChannel | None) -> None:
        logs.current_stage.set(stage)  # this task's log lines (and its executor calls') name the stage
        adapter = self.stages.adapters[stage]
        ctx = self._context(req, stage)
        executor = self.stages.executors[stage]
        start = time.perf_counter()
        try:
            if channel is not None:
                def on_end(upstream: Any) -> None:
                    ctx.upstream_payload = upstream

                result = await adapter.consume(channel.aiter(on_end), lambda: channel.iter_blocking(on_end), ctx, executor)
            else:
                assert payload is not None
                result = await adapter.process(payload, ctx, executor)
            if req.cancel.is_set():
                return
            out = as_payload(stage, req.rid, result)
        except asyncio.CancelledError:
            return
        except RequestCancelled:
            if req.cancel.is_set():
                return
            raise
        except Exception as exc:  # noqa: BLE001 - any stage exception fails only this request
            if not req.cancel.is_set():
                await self._fail(req, stage, exc)
            return
        req.timings[stage] = time.perf_counter() - start
        if (self.local[stage].tp_rank or 0) != 0:
            return  # TP ranks > 0 computed their shard; rank 0's output continues
        try:
            await self._forward(req, stage, out)
        except Exception as exc:  # noqa: BLE001 - route_fn errors / undeliverable output
            if not req.cancel.is_set():
                await self._fail(req, stage, exc, what="routing")

    async def _fail(self, req: RequestState, stage: str, exc: BaseException, what: str | None = None) -> None:
        process = self.router.stages[stage].process if stage in self.router.stages else self.instance.process
        where = f"stage {stage} (process {process})" + (f" {what}" if what else "")
        message = f"{where}: {type(exc).__name__}: {exc}"
        detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        log.error("request %s failed: %s", req.rid, message, exc_info=(type(exc), exc, exc.__traceback__), extra={"stage": stage})
        self._abort(req)
        self._mark_finished(req.rid)
        header = E.header(E.ERROR, rid=req.rid, stage=stage, src=self.name, timings=req.timings, text=message, has_data=True)
        if isinstance(exc, InvalidRequest):  # the client's mistake: its own words, and the field at fault
            header[E.TEXT], header[E.PARAM] = exc.message, exc.param
        await self.to_parent.send(header, detail)

