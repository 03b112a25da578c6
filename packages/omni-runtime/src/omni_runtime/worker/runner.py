"""The worker's stage runner: start and run one stage for one request, and report its failure.

A stage runs as a task on the worker's event loop (``async def`` stages) or
in its stage's thread pool (``def`` stages). A payload starts its stage (or,
for a stage that waits for several sources, the merge once all arrived); the
first chunk of a stream starts its consumer. Any exception fails only that
request: the parent gets the message and the traceback, every other process
of the request is told to stop.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from typing import Any

from omni_compiler.topology import ProcessInstance, StagePlacement

from .. import envelope as E
from .. import logs
from ..context import StageContext
from ..errors import InvalidRequest, RequestCancelled
from ..flow import CreditReturn
from ..payload import StagePayload
from ..routing import Router
from .build import BuiltStages
from .channel import ChunkChannel
from .forward import Forwarder
from .requests import WorkerRequests
from .stage import as_payload
from .state import RequestState

log = logging.getLogger("omni.worker")


class StageRunner:
    """Runs this process's stages for its requests (the forwarder's :class:`~.ports.LocalDelivery`)."""

    def __init__(
        self,
        instance: ProcessInstance,
        router: Router,
        stages: BuiltStages,
        requests: WorkerRequests,
        forwarder: Forwarder,
    ) -> None:
        self.instance = instance
        self.name = instance.name
        self.router = router
        self.local: dict[str, StagePlacement] = {p.stage: p for p in instance.stages}
        self.stages = stages
        self.requests = requests
        self.forwarder = forwarder
        self.loop = requests.loop

    # -- starting stages -----------------------------------------------------
    def on_payload(self, req: RequestState, stage: str, src: str, payload: StagePayload) -> None:
        sources = self.router.wait_sources[stage]
        if sources and src in sources:
            parts = req.parts.setdefault(stage, {})
            parts[src] = payload
            if not all(s in parts for s in sources):
                return
            del req.parts[stage]
            self.requests.spawn(req, self._merge_and_run(req, stage, parts))
            return
        self.requests.spawn(req, self._run_stage(req, stage, payload, None))

    def channel(self, req: RequestState, stage: str) -> ChunkChannel:
        channel = req.channels.get(stage)
        if channel is None:
            returns = CreditReturn()

            def on_taken(origin: str) -> None:
                count = returns.took(origin)
                if count:
                    self.forwarder.return_credit(req, stage, origin, count)

            channel = req.channels[stage] = ChunkChannel(self.loop, producers=len(self.router.stream_producers[stage]), on_taken=on_taken)
            self.requests.spawn(req, self._run_stage(req, stage, None, channel))
        return channel

    # -- running one stage -----------------------------------------------------
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
            aemit=lambda chunk: self.forwarder.emit(req, stage, chunk),
            loop=self.loop,
            deadline=req.deadline,
            timings=req.timings,
        )

    async def _merge_and_run(self, req: RequestState, stage: str, parts: dict[str, StagePayload]) -> None:
        try:
            merged = as_payload(stage, req.rid, self.stages.merge_fns[stage](parts))
        except Exception as exc:  # noqa: BLE001 - a user merge_fn failure fails its request
            await self.fail(req, stage, exc, what="merge_fn")
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
                await self.fail(req, stage, exc)
            return
        req.timings[stage] = time.perf_counter() - start
        if (self.local[stage].tp_rank or 0) != 0:
            return  # TP ranks > 0 computed their shard; rank 0's output continues
        try:
            await self.forwarder.forward(req, stage, out)
        except Exception as exc:  # noqa: BLE001 - route_fn errors / undeliverable output
            if not req.cancel.is_set():
                await self.fail(req, stage, exc, what="routing")

    async def fail(self, req: RequestState, stage: str, exc: BaseException, what: str | None = None) -> None:
        process = self.router.stages[stage].process if stage in self.router.stages else self.instance.process
        where = f"stage {stage} (process {process})" + (f" {what}" if what else "")
        message = f"{where}: {type(exc).__name__}: {exc}"
        detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        if isinstance(exc, InvalidRequest):  # the client's mistake: one line, no traceback (those are for server faults)
            log.info("request %s refused by %s: %s (param %s)", req.rid, where, exc.message, exc.param, extra={"stage": stage})
        else:
            log.error("request %s failed: %s", req.rid, message, exc_info=(type(exc), exc, exc.__traceback__), extra={"stage": stage})
        self.requests.abort(req)
        self.requests.mark_finished(req.rid)
        header = E.header(E.ERROR, rid=req.rid, stage=stage, src=self.name, timings=req.timings, text=message, has_data=True)
        if isinstance(exc, InvalidRequest):  # the client's mistake: its own words, and the field at fault
            header[E.TEXT], header[E.PARAM] = exc.message, exc.param
        await self.forwarder.to_parent.send(header, detail)
