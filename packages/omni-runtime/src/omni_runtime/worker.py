"""The OS process that hosts one process instance's stages.

The parent spawns this with the JSON topology and the instance name only (no
pickled user objects). It arms the parent-death signal, sets the stages' env,
builds each stage in declaration order, reports ready (or the failing stage
and its traceback), then serves messages on its PULL socket until told to stop.

Handoffs to a stage in this same process call the receiving side directly with
the very object the producer returned; handoffs to another process go over a
PUSH socket straight to that worker (the parent is not on the data path).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from collections import OrderedDict, deque
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from omni_compiler.topology import CompiledTopology, ProcessInstance, StagePlacement

from . import envelope as E
from . import pdeath
from .channel import ChunkChannel
from .context import StageContext
from .errors import RequestCancelled
from .factory import Injection, import_dotted, injected_kwargs, resolve_device
from .payload import StagePayload
from .routing import Router
from .stage import StageAdapter, as_payload

if TYPE_CHECKING:  # the transport (and torch) is imported in the worker process only
    from .transport import Message


@dataclass(frozen=True)
class WorkerOptions:
    """Runtime-wide settings every worker gets (JSON, no pickle)."""

    device: str | None = None
    model_path: str | None = None
    enforce_memory_fraction: bool = False
    stage_threads: int = 64
    shm_budget_bytes: int = 1 << 30

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_json(cls, text: str) -> WorkerOptions:
        return cls(**json.loads(text))


@dataclass
class _Request:
    rid: str
    binding: dict[str, int]
    cancel: asyncio.Event
    timings: dict[str, float] = field(default_factory=dict)
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    channels: dict[str, ChunkChannel] = field(default_factory=dict)
    parts: dict[str, dict[str, StagePayload]] = field(default_factory=dict)


class StageBuildError(Exception):
    def __init__(self, stage: str | None, tb: str) -> None:
        super().__init__(tb)
        self.stage = stage
        self.tb = tb


def main(topology_json: str, instance_name: str, run_json: str, parent_pid: int, options_json: str) -> None:
    """Entry point of a spawned worker process (the ``multiprocessing`` target)."""
    run = json.loads(run_json)
    pdeath.arm(parent_pid, lambda: _on_parent_death(run))
    topology = CompiledTopology.from_json(topology_json)
    options = WorkerOptions.from_json(options_json)
    instance = next(i for i in topology.instances if i.name == instance_name)
    for placement in instance.stages:
        os.environ.update(topology.stage(placement.stage).env)
    worker = Worker(topology, instance, run, options)
    profile_dir = os.environ.get("OMNI_RUNTIME_PROFILE_DIR")
    profiler = None
    if profile_dir:  # operators: cProfile every worker, one .prof file per instance
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        asyncio.run(worker.run())
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(os.path.join(profile_dir, f"{instance_name}.prof"))
        sys.stdout.flush()
        sys.stderr.flush()
    # Threads of sync stages that ignore ctx.cancelled must not keep a stopped worker alive.
    os._exit(0)


def _on_parent_death(run: dict[str, str]) -> None:
    """The parent is gone (even SIGKILL): remove the run's sockets and shared memory ourselves.

    Plain ``os``/``shutil`` only: this can run from a signal handler while the
    transport package is still half imported.
    """
    import shutil

    shutil.rmtree(run["path"], ignore_errors=True)
    prefix = run["shm_prefix"]
    if prefix.endswith("-") and len(prefix) > 5:
        try:
            names = os.listdir("/dev/shm")
        except OSError:
            names = []
        for name in names:
            if name.startswith(prefix):
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass


class Worker:
    def __init__(self, topology: CompiledTopology, instance: ProcessInstance, run: dict[str, str], options: WorkerOptions) -> None:
        self.topology = topology
        self.instance = instance
        self.name = instance.name
        self.run_spec = run
        self.options = options
        self.router = Router(topology)
        self.local: dict[str, StagePlacement] = {p.stage: p for p in instance.stages}
        self.adapters: dict[str, StageAdapter] = {}
        self.devices: dict[str, str] = {}
        self.executors: dict[str, ThreadPoolExecutor] = {}
        self.route_fns: dict[str, Callable[[StagePayload], Any]] = {}
        self.merge_fns: dict[str, Callable[[dict[str, StagePayload]], Any]] = {}
        self.requests: dict[str, _Request] = {}
        self.finished: OrderedDict[str, None] = OrderedDict()
        self.loop: asyncio.AbstractEventLoop

    # lifecycle -------------------------------------------------------------
    async def run(self) -> None:
        from .plane import Plane
        from .transport import RunDir

        self.loop = asyncio.get_running_loop()
        run = RunDir.from_dict(self.run_spec)
        if "node" in self.run_spec:  # placed on a node of a cluster: IPC on this node, TCP to the others
            from .raycluster.dataplane import NodePlane

            self.plane = NodePlane(run, self.name, self.run_spec["node"], self.run_spec.get("peers"), self.options.shm_budget_bytes)
        else:
            self.plane = Plane(run, self.name, self.options.shm_budget_bytes)
        self.to_parent = self.plane.outbox(E.PARENT)
        try:
            try:
                self._build()
            except StageBuildError as exc:
                await self.to_parent.send(E.header(E.STARTUP_ERROR, stage=exc.stage or "", src=self.name, has_data=True), exc.tb)
                return
            endpoint = self.plane.endpoint() if hasattr(self.plane, "endpoint") else None
            await self.to_parent.send(E.header(E.READY, src=self.name, has_data=endpoint is not None), endpoint)
            try:
                await self._serve()
            finally:
                for req in list(self.requests.values()):
                    self._abort(req)
                for executor in self.executors.values():
                    executor.shutdown(wait=False, cancel_futures=True)
        finally:
            self.plane.close()

    def _build(self) -> None:
        stage_name: str | None = None
        try:
            self._enforce_memory_fraction()
            for placement in self.instance.stages:
                stage_name = placement.stage
                self._build_stage(placement)
            stage_name = None
            self._check_contract()
        except BaseException:
            raise StageBuildError(stage_name, traceback.format_exc()) from None

    def _gpu_fractions(self) -> dict[int, float]:
        totals: dict[int, float] = {}
        for placement in self.instance.stages:
            if placement.gpu is not None and placement.memory_fraction is not None:
                totals[placement.gpu] = round(totals.get(placement.gpu, 0.0) + placement.memory_fraction, 6)
        return totals

    def _enforce_memory_fraction(self) -> None:
        """Opt-in: cap this process's CUDA allocator at its stages' declared share of each GPU."""
        if not self.options.enforce_memory_fraction or self.options.device == "cpu":
            return
        totals = self._gpu_fractions()
        if not totals:
            return
        import torch

        if not torch.cuda.is_available():
            print(f"omni-runtime: {self.name}: no CUDA device, memory fraction enforcement skipped", file=sys.stderr)
            return
        for gpu, fraction in totals.items():
            torch.cuda.set_per_process_memory_fraction(min(fraction, 1.0), gpu)

    def _build_stage(self, placement: StagePlacement) -> None:
        stage = self.topology.stage(placement.stage)
        device, gpu_id = resolve_device(placement.gpu, self.options.device)
        fractions = self._gpu_fractions()
        injection = Injection(
            gpu_id=gpu_id,
            device=device,
            total_gpu_memory_fraction=placement.memory_fraction,
            process_total_gpu_memory_fraction=fractions.get(placement.gpu) if placement.gpu is not None else None,
            stage_name=stage.name,
            model_path=self.options.model_path,
            tp_rank=placement.tp_rank,
            tp_size=placement.tp_size,
        )
        factory = import_dotted(stage.factory)
        obj = factory(**injected_kwargs(factory, injection, stage.factory_args))
        self.adapters[stage.name] = StageAdapter(stage.name, obj)
        self.devices[stage.name] = device
        self.executors[stage.name] = ThreadPoolExecutor(max_workers=self.options.stage_threads, thread_name_prefix=f"stage-{stage.name}")
        if stage.route_fn:
            self.route_fns[stage.name] = import_dotted(stage.route_fn)
        if stage.merge_fn:
            self.merge_fns[stage.name] = import_dotted(stage.merge_fn)

    def _check_contract(self) -> None:
        for name, adapter in self.adapters.items():
            producers = self.router.stream_producers[name]
            if producers and not adapter.can_consume:
                raise TypeError(
                    f"stage {name} receives stream_to chunks from {', '.join(producers)} but its stage object "
                    f"({type(adapter.obj).__name__}) has no consume(chunks, ctx) method (docs/stage-contract.md)"
                )
            feeds = [s.name for s in self.topology.stages if name in s.next and name not in s.stream_to]
            if (feeds or name == self.topology.entry_stage or self.router.wait_sources[name]) and not adapter.can_process:
                raise TypeError(f"stage {name} receives payloads but its stage object ({type(adapter.obj).__name__}) has no process(payload, ctx) method")

    # inbound ---------------------------------------------------------------
    async def _serve(self) -> None:
        """Handle inbound messages, in order, until SHUTDOWN.

        Messages are taken from the inbox's reader callback (``listen``), not
        by a task awaiting each batch: that saves a Future and a task switch,
        one whole trip through the event loop, on every hop. The handling is
        synchronous except for a large decode (off the loop) and a failure
        report; such a message finishes in a task, and the messages after it
        wait for that task, as they waited for the receive loop before.
        """
        self._stopped: asyncio.Future[None] = self.loop.create_future()
        self._queued: deque[Message] = deque()
        self._busy = False
        inbox = self.plane.inbox
        inbox.listen(self._take_messages)
        try:
            await self._stopped
        finally:
            inbox.listen(None)

    def _take_messages(self) -> None:
        """Inbox callback (and the end of a message handled in a task): handle what is queued."""
        if self._busy or self._stopped.done():
            return
        try:
            self._handle_queued()
        except Exception as exc:  # noqa: BLE001 - what ended the receive loop before now ends _serve (and the worker)
            if not self._stopped.done():
                self._stopped.set_exception(exc)

    def _handle_queued(self) -> None:
        queued = self._queued
        while True:
            if not queued:
                queued.extend(self.plane.inbox.recv_batch_nowait())
                if not queued:
                    return
            msg = queued.popleft()
            if msg.header[E.KIND] == E.SHUTDOWN:
                msg.discard()
                while queued:
                    queued.popleft().discard()
                self._stopped.set_result(None)
                return
            rest = self._on_message(msg)
            if rest is not None:
                self._busy = True
                self.loop.create_task(rest).add_done_callback(self._message_task_done)
                return

    def _message_task_done(self, task: asyncio.Task[None]) -> None:
        self._busy = False
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            if not self._stopped.done():
                self._stopped.set_exception(exc)
            return
        self._take_messages()

    def _on_message(self, msg: Message) -> Coroutine[Any, Any, None] | None:
        """Handle one message now; returns a coroutine to run before the next message when it needs an await."""
        h = msg.header
        kind = h[E.KIND]
        rid = h.get(E.RID, "")
        if kind == E.CANCEL:
            msg.discard()
            req = self.requests.get(rid)
            self._mark_finished(rid)
            if req is not None:
                self._abort(req)
            return None
        if kind == E.PEERS:
            self.plane.learn(msg.payload())
            return None
        if rid in self.finished:
            msg.discard()
            return None
        has_data = h.get(E.HAS_DATA, False)
        if not has_data:
            msg.discard()
            self._deliver(h, rid, kind, None, has_data)
            return None
        if msg.decodes_off_loop:
            return self._decode_and_deliver(msg)
        try:
            data = msg.payload()
        except Exception as exc:  # noqa: BLE001 - a malformed or stale message fails its request only
            return self._fail_receive(msg, exc)
        self._deliver(h, rid, kind, data, has_data)
        return None

    async def _decode_and_deliver(self, msg: Message) -> None:
        h = msg.header
        try:
            data = await msg.payload_async()
        except Exception as exc:  # noqa: BLE001 - a malformed or stale message fails its request only
            await self._fail_receive(msg, exc)
            return
        self._deliver(h, h.get(E.RID, ""), h[E.KIND], data, True)

    async def _fail_receive(self, msg: Message, exc: Exception) -> None:
        msg.discard()
        h = msg.header
        req = self._request(h.get(E.RID, ""), h.get(E.BINDING, {}))
        await self._fail(req, h.get(E.STAGE, ""), exc, what="receive")

    def _deliver(self, h: dict[str, Any], rid: str, kind: str, data: Any, has_data: bool) -> None:
        req = self._request(rid, h.get(E.BINDING, {}))
        timings = h.get(E.TIMINGS)
        if timings:
            req.timings.update(timings)
        stage = h[E.STAGE]
        if kind == E.RUN:
            self._on_payload(req, stage, h.get(E.SRC, ""), StagePayload(rid, data))
        elif kind == E.CHUNK:
            self._channel(req, stage).put_nowait(data)
        elif kind == E.DONE:
            self._channel(req, stage).finish(StagePayload(rid, data) if has_data else None)

    def _request(self, rid: str, binding: dict[str, int]) -> _Request:
        req = self.requests.get(rid)
        if req is None:
            req = self.requests[rid] = _Request(rid, dict(binding), asyncio.Event())
        return req

    def _mark_finished(self, rid: str) -> None:
        self.finished[rid] = None
        while len(self.finished) > 10000:
            self.finished.popitem(last=False)

    def _on_payload(self, req: _Request, stage: str, src: str, payload: StagePayload) -> None:
        sources = self.router.wait_sources[stage]
        if sources and src in sources:
            parts = req.parts.setdefault(stage, {})
            parts[src] = payload
            if not all(s in parts for s in sources):
                return
            del req.parts[stage]
            self._spawn(req, self._merge_and_run(req, stage, parts))
            return
        self._spawn(req, self._run_stage(req, stage, payload, None))

    def _channel(self, req: _Request, stage: str) -> ChunkChannel:
        channel = req.channels.get(stage)
        if channel is None:
            channel = req.channels[stage] = ChunkChannel(self.loop, producers=len(self.router.stream_producers[stage]))
            self._spawn(req, self._run_stage(req, stage, None, channel))
        return channel

    def _spawn(self, req: _Request, coro: Any) -> None:
        task = self.loop.create_task(coro)
        req.tasks.add(task)
        task.add_done_callback(lambda t: self._task_done(req, t))

    def _task_done(self, req: _Request, task: asyncio.Task[Any]) -> None:
        req.tasks.discard(task)
        if not req.tasks and not req.parts and self.requests.get(req.rid) is req:
            del self.requests[req.rid]

    def _abort(self, req: _Request) -> None:
        req.cancel.set()
        for channel in req.channels.values():
            channel.abort(RequestCancelled())
        current = asyncio.current_task()
        for task in list(req.tasks):
            if task is not current:
                task.cancel()
        self.requests.pop(req.rid, None)

    # stage execution -------------------------------------------------------
    def _context(self, req: _Request, stage: str) -> StageContext:
        placement = self.local[stage]
        return StageContext(
            request_id=req.rid,
            stage_name=stage,
            process_name=self.router.stages[stage].process,
            device=self.devices[stage],
            tp_rank=placement.tp_rank,
            tp_size=placement.tp_size,
            cancel_event=req.cancel,
            aemit=lambda chunk: self._emit(req, stage, chunk),
            loop=self.loop,
        )

    async def _merge_and_run(self, req: _Request, stage: str, parts: dict[str, StagePayload]) -> None:
        try:
            merged = as_payload(stage, req.rid, self.merge_fns[stage](parts))
        except Exception as exc:  # noqa: BLE001 - a user merge_fn failure fails its request
            await self._fail(req, stage, exc, what="merge_fn")
            return
        await self._run_stage(req, stage, merged, None)

    async def _run_stage(self, req: _Request, stage: str, payload: StagePayload | None, channel: ChunkChannel | None) -> None:
        adapter = self.adapters[stage]
        ctx = self._context(req, stage)
        executor = self.executors[stage]
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

    async def _fail(self, req: _Request, stage: str, exc: BaseException, what: str | None = None) -> None:
        process = self.router.stages[stage].process if stage in self.router.stages else self.instance.process
        where = f"stage {stage} (process {process})" + (f" {what}" if what else "")
        message = f"{where}: {type(exc).__name__}: {exc}"
        detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self._abort(req)
        self._mark_finished(req.rid)
        await self.to_parent.send(E.header(E.ERROR, rid=req.rid, stage=stage, src=self.name, timings=req.timings, text=message, has_data=True), detail)

    # outbound --------------------------------------------------------------
    async def _emit(self, req: _Request, stage: str, chunk: Any) -> None:
        if req.cancel.is_set():
            raise RequestCancelled()
        if (self.local[stage].tp_rank or 0) != 0:
            return
        spec = self.router.stages[stage]
        for target in spec.stream_to:
            await self._send(req, target, E.CHUNK, stage, chunk, True)
        if spec.terminal:
            await self.to_parent.send(E.header(E.OUT, rid=req.rid, stage=stage, has_data=True), chunk, timeout=None)

    async def _forward(self, req: _Request, stage: str, out: StagePayload) -> None:
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
            await self._send(req, target, E.DONE, stage, out if carries else None, carries)
            sent = True
        streamed = set(spec.stream_to)
        for target in chosen:
            if target not in streamed:
                await self._send(req, target, E.RUN, stage, out, True)
                sent = True
        for target in self.router.fan_in_targets[stage]:
            if target not in streamed and target not in chosen:
                await self._send(req, target, E.RUN, stage, out, True)
                sent = True
        if spec.terminal:
            await self.to_parent.send(E.header(E.RESULT, rid=req.rid, stage=stage, timings=req.timings, has_data=True), out.data, timeout=None)
            sent = True
        if not sent:
            raise ValueError(f"stage {stage} is not terminal and its output went to no stage (route_fn chose none of {list(spec.next)!r})")

    async def _send(self, req: _Request, stage: str, kind: str, src: str, value: Any, has_data: bool) -> None:
        """Deliver a payload, chunk or done signal to every instance running ``stage`` for this request."""
        data = value.data if isinstance(value, StagePayload) else value
        for target in self.router.targets(stage, req.binding):
            if target.instance == self.name:
                self._deliver_local(req, kind, stage, src, value)
                if kind == E.CHUNK:
                    await req.channels[stage].put(value)
                continue
            # each TP rank gets its own encoding: a shared-memory reference is claimed once
            header = E.header(kind, rid=req.rid, stage=stage, src=src, binding=req.binding, timings=req.timings, has_data=has_data)
            await self.plane.outbox(target.instance).send(header, data if has_data else None, timeout=None)

    def _deliver_local(self, req: _Request, kind: str, stage: str, src: str, value: Any) -> None:
        """Hand the object itself to a stage of this process (chunks are queued by the caller, with back-pressure)."""
        if kind == E.RUN:
            self._on_payload(req, stage, src, value)
        elif kind == E.CHUNK:
            self._channel(req, stage)
        elif kind == E.DONE:
            self._channel(req, stage).finish(value)
