"""The worker's forwarder: send a stage's output, chunks and done signals on.

Handoffs to a stage in this same process go to :class:`~.ports.LocalDelivery`
with the very object the producer returned; handoffs to another process go
over that process's outbox (the parent is not on the stage-to-stage path).
A streamed chunk to another process (or to the parent, for a terminal
stage's output) first spends a credit of its request and edge
(:mod:`omni_runtime.flow`), so a producer waits for a slow consumer.

Control messages (credit back to a producer, SIGTERM reports) are best
effort, but a failed one is logged once with its request and peer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from omni_compiler.topology import StagePlacement

from .. import envelope as E
from ..control import ControlSender
from ..errors import RequestCancelled
from ..flow import CreditGate
from ..payload import StagePayload
from ..routing import Router
from .ports import LocalDelivery
from .state import RequestState


@dataclass(eq=False)
class Forwarder:
    """Sends for one process instance: outputs, chunks and done signals to their targets, control messages."""

    name: str
    router: Router
    local_stages: dict[str, StagePlacement]
    route_fns: dict[str, Callable[[StagePayload], Any]]
    plane: Any
    loop: asyncio.AbstractEventLoop
    delivery: LocalDelivery | None = None
    """Set by the worker once the stage runner exists."""

    def __post_init__(self) -> None:
        self.to_parent = self.plane.outbox(E.PARENT)
        self.control = ControlSender(timeout=5.0, logger="omni.worker")
        self.control.attach(self.plane)

    # -- streamed chunks -----------------------------------------------------
    async def emit(self, req: RequestState, stage: str, chunk: Any) -> None:
        if req.cancel.is_set():
            raise RequestCancelled()
        if (self.local_stages[stage].tp_rank or 0) != 0:
            return
        spec = self.router.stages[stage]
        for target in spec.stream_to:
            await self.send(req, target, E.CHUNK, stage, chunk, True)
        if spec.terminal:
            await self._gate(req, E.OUTPUT, E.PARENT).acquire()
            await self.to_parent.send(E.header(E.OUT, rid=req.rid, stage=stage, instance=self.name, has_data=True), chunk, timeout=None)

    def _gate(self, req: RequestState, stage: str, instance: str) -> CreditGate:
        gate = req.gates.get((stage, instance))
        if gate is None:
            gate = req.gates[(stage, instance)] = CreditGate(self.loop)
        return gate

    def return_credit(self, req: RequestState, stage: str, origin: str, count: int) -> None:
        """Our ``stage`` took ``count`` chunks from the producer instance ``origin``: let it send that many more."""
        header = E.header(E.CREDIT, rid=req.rid, stage=stage, instance=self.name, count=count)
        self.loop.create_task(self.control.send(origin, header))

    # -- a stage's output ----------------------------------------------------
    async def forward(self, req: RequestState, stage: str, out: StagePayload) -> None:
        spec = self.router.stages[stage]
        chosen: list[str] = list(spec.next)
        if stage in self.route_fns and chosen:
            picked = self.route_fns[stage](out)
            picked = [picked] if isinstance(picked, str) else list(picked)
            unknown = [p for p in picked if p not in spec.next]
            if unknown:
                raise ValueError(f"route_fn returned {unknown!r}, which is not among next targets {list(spec.next)!r}")
            chosen = picked
        sent = False
        for target in spec.stream_to:
            carries = target in chosen
            await self.send(req, target, E.DONE, stage, out if carries else None, carries)
            sent = True
        streamed = set(spec.stream_to)
        for target in chosen:
            if target not in streamed:
                await self.send(req, target, E.RUN, stage, out, True)
                sent = True
        for target in self.router.fan_in_targets[stage]:
            if target not in streamed and target not in chosen:
                await self.send(req, target, E.RUN, stage, out, True)
                sent = True
        if spec.terminal:
            await self.to_parent.send(E.header(E.RESULT, rid=req.rid, stage=stage, timings=req.timings, has_data=True), out.data, timeout=None)
            sent = True
        if not sent:
            raise ValueError(f"stage {stage} is not terminal and its output went to no stage (route_fn chose none of {list(spec.next)!r})")

    async def send(self, req: RequestState, stage: str, kind: str, src: str, value: Any, has_data: bool) -> None:
        """Deliver a payload, chunk or done signal to every instance running ``stage`` for this request."""
        data = value.data if isinstance(value, StagePayload) else value
        for target in self.router.targets(stage, req.binding):
            if target.instance == self.name:
                self._deliver_local(req, kind, stage, src, value)
                if kind == E.CHUNK:
                    await req.channels[stage].put(value)
                continue
            if kind == E.CHUNK:
                await self._gate(req, stage, target.instance).acquire()
            # each TP rank gets its own encoding: a shared-memory reference is claimed once
            header = E.header(
                kind, rid=req.rid, stage=stage, src=src, binding=req.binding, timings=req.timings, has_data=has_data,
                deadline=req.wall_deadline, instance=self.name,
            )
            await self.plane.outbox(target.instance).send(header, data if has_data else None, timeout=None)

    def _deliver_local(self, req: RequestState, kind: str, stage: str, src: str, value: Any) -> None:
        """Hand the object itself to a stage of this process (chunks are queued by the caller, with back-pressure)."""
        assert self.delivery is not None
        if kind == E.RUN:
            self.delivery.on_payload(req, stage, src, value)
        elif kind == E.CHUNK:
            self.delivery.channel(req, stage)
        elif kind == E.DONE:
            self.delivery.channel(req, stage).finish(value)
