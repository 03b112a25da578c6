"""Build one process instance's stages, in declaration order, from their factories.

The worker imports each factory, calls it with its ``factory_args`` plus the
injected values its signature names, and resolves the stage object's calling
convention once (:class:`StageAdapter`). Any failure, import errors included,
becomes a :class:`StageBuildError` naming the stage, which the worker reports
to the parent with the traceback instead of dying silently.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from omni_compiler.topology import CompiledTopology, ProcessInstance, StagePlacement

from ..distributed.launch import join_for_instance
from ..payload import StagePayload
from ..routing import Router
from .factory import Injection, import_dotted, injected_kwargs, resolve_device
from .options import WorkerOptions
from .stage import StageAdapter

log = logging.getLogger("omni.worker")


class StageBuildError(Exception):
    """A stage (or the process setup before any stage) failed to build; ``tb`` is the formatted traceback."""

    def __init__(self, stage: str | None, tb: str) -> None:
        super().__init__(tb)
        self.stage = stage
        self.tb = tb


@dataclass
class BuiltStages:
    """The stages of one process instance, ready to run."""

    adapters: dict[str, StageAdapter] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)
    executors: dict[str, ThreadPoolExecutor] = field(default_factory=dict)
    route_fns: dict[str, Callable[[StagePayload], Any]] = field(default_factory=dict)
    merge_fns: dict[str, Callable[[dict[str, StagePayload]], Any]] = field(default_factory=dict)
    tp_group: Any = None

    def shutdown(self) -> None:
        for executor in self.executors.values():
            executor.shutdown(wait=False, cancel_futures=True)


def build_stages(topology: CompiledTopology, instance: ProcessInstance, options: WorkerOptions, router: Router, run: dict | None = None) -> BuiltStages:
    """Every stage of ``instance``, in declaration order; :class:`StageBuildError` on the first failure.

    A TP rank first joins its group (``omni_runtime.distributed``); failing to is a startup error
    that names the group and the rank."""
    built = BuiltStages()
    stage_name: str | None = None
    try:
        _enforce_memory_fraction(instance, options)
        built.tp_group = join_for_instance(run or {}, instance, options.device)
        for placement in instance.stages:
            stage_name = placement.stage
            _build_stage(built, topology, instance, placement, options)
        stage_name = None
        _check_contract(built, topology, router)
    except BaseException:
        built.shutdown()
        raise StageBuildError(stage_name, traceback.format_exc()) from None
    return built


def gpu_fractions(instance: ProcessInstance) -> dict[int, float]:
    """Declared memory fraction per GPU, summed over this process's stages."""
    totals: dict[int, float] = {}
    for placement in instance.stages:
        if placement.gpu is not None and placement.memory_fraction is not None:
            totals[placement.gpu] = round(totals.get(placement.gpu, 0.0) + placement.memory_fraction, 6)
    return totals


def _enforce_memory_fraction(instance: ProcessInstance, options: WorkerOptions) -> None:
    """Opt-in: cap this process's CUDA allocator at its stages' declared share of each GPU."""
    if not options.enforce_memory_fraction or options.device == "cpu":
        return
    totals = gpu_fractions(instance)
    if not totals:
        return
    import torch

    if not torch.cuda.is_available():
        log.warning("no CUDA device: memory fraction enforcement skipped")
        return
    for gpu, fraction in totals.items():
        torch.cuda.set_per_process_memory_fraction(min(fraction, 1.0), gpu)


def _build_stage(built: BuiltStages, topology: CompiledTopology, instance: ProcessInstance, placement: StagePlacement, options: WorkerOptions) -> None:
    stage = topology.stage(placement.stage)
    device, gpu_id = resolve_device(placement.gpu, options.device)
    fractions = gpu_fractions(instance)
    injection = Injection(
        gpu_id=gpu_id,
        device=device,
        total_gpu_memory_fraction=placement.memory_fraction,
        process_total_gpu_memory_fraction=fractions.get(placement.gpu) if placement.gpu is not None else None,
        stage_name=stage.name,
        model_path=options.model_path,
        tp_rank=placement.tp_rank,
        tp_size=placement.tp_size,
        tp_group=built.tp_group,
    )
    factory = import_dotted(stage.factory)
    obj = factory(**injected_kwargs(factory, injection, stage.factory_args))
    built.adapters[stage.name] = StageAdapter(stage.name, obj)
    built.devices[stage.name] = device
    built.executors[stage.name] = ThreadPoolExecutor(max_workers=options.stage_threads, thread_name_prefix=f"stage-{stage.name}")
    if stage.route_fn:
        built.route_fns[stage.name] = import_dotted(stage.route_fn)
    if stage.merge_fn:
        built.merge_fns[stage.name] = import_dotted(stage.merge_fn)


def _check_contract(built: BuiltStages, topology: CompiledTopology, router: Router) -> None:
    for name, adapter in built.adapters.items():
        producers = router.stream_producers[name]
        if producers and not adapter.can_consume:
            raise TypeError(
                f"stage {name} receives stream_to chunks from {', '.join(producers)} but its stage object "
                f"({type(adapter.obj).__name__}) has no consume(chunks, ctx) method (docs/stage-contract.md)"
            )
        feeds = [s.name for s in topology.stages if name in s.next and name not in s.stream_to]
        if (feeds or name == topology.entry_stage or router.wait_sources[name]) and not adapter.can_process:
            raise TypeError(f"stage {name} receives payloads but its stage object ({type(adapter.obj).__name__}) has no process(payload, ctx) method")
