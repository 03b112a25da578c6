"""Drive a model's stages in-process, without the runtime's processes, but along the path a user
takes: the pipeline file loaded and validated by omni-config (knobs and overrides included),
compiled by omni-compiler, and each factory called the way the worker calls it
(``omni_runtime.worker.factory``: ``factory_args`` plus the injected ``device``/``stage_name``); payloads
and streamed chunks are then routed the way the stage contract says."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import torch

from omni_compiler import compile as compile_topology
from omni_compiler.topology import CompiledTopology
from omni_config import load_config
from omni_runtime import StagePayload
from omni_runtime.worker.factory import Injection, import_dotted, injected_kwargs


@dataclass
class FakeCtx:
    request_id: str
    stage_name: str
    process_name: str = "pipeline"
    device: str = "cpu"
    cancelled: bool = False
    emitted: list[Any] = field(default_factory=list)
    upstream_payload: Any = None

    def emit(self, chunk: Any) -> None:
        self.emitted.append(chunk)


def pipeline_file(folder: str, variant: str = "pipeline") -> str:
    """The pipeline file as the installed package ships it (no path into a source checkout)."""
    return str(resources.files(f"omni_models.{folder}").joinpath(f"{variant}.yaml"))


def as_overrides(overrides: Mapping[str, Mapping[str, Any]] | Sequence[str] | None) -> list[str]:
    """``{stage: {knob: value}}`` as the command line writes it (``--stages.S.factory_args.K V``)."""
    if overrides is None:
        return []
    if not isinstance(overrides, Mapping):
        return list(overrides)
    return [f"--stages.{stage}.factory_args.{knob}={json.dumps(value)}" for stage, knobs in overrides.items() for knob, value in knobs.items()]


def topology(folder: str, variant: str = "pipeline", overrides: Mapping[str, Mapping[str, Any]] | Sequence[str] | None = None) -> CompiledTopology:
    """omni-config (validation, knobs, overrides) then omni-compiler, as ``omni serve`` does."""
    return compile_topology(load_config(pipeline_file(folder, variant), as_overrides(overrides)))


def build_stages(
    folder: str, variant: str = "pipeline", overrides: Mapping[str, Mapping[str, Any]] | Sequence[str] | None = None, *, model_path: str | None = None
) -> dict[str, Any]:
    """Every stage object of the compiled pipeline, built as the worker builds it (on the CPU);
    ``model_path`` is what ``--weights DIR`` hands the factories."""
    return build_compiled(topology(folder, variant, overrides), model_path=model_path)


def build_compiled(compiled: CompiledTopology, *, model_path: str | None = None) -> dict[str, Any]:
    built = {}
    for stage in compiled.stages:
        factory = import_dotted(stage.factory)
        injection = Injection(
            gpu_id=None, device="cpu", total_gpu_memory_fraction=None, process_total_gpu_memory_fraction=None,
            stage_name=stage.name, model_path=model_path, tp_rank=None, tp_size=1,
        )
        built[stage.name] = factory(**injected_kwargs(factory, injection, stage.factory_args))
    return built


@dataclass
class Result:
    audio: torch.Tensor
    sample_rate: int
    final: Any
    chunks: list[Any]
    trace: dict[str, Any]
    emitted: dict[str, list[Any]]


def synthesize(
    folder: str | None, data: dict[str, Any], *, variant: str = "pipeline", stages: dict[str, Any] | None = None, request_id: str = "req-1",
    compiled: CompiledTopology | None = None,
) -> Result:
    """Run one request through every stage in topological order, in this process."""
    compiled = compiled or topology(folder, variant)
    stages = stages or build_compiled(compiled)
    by_name = {s.name: s for s in compiled.stages}
    name = compiled.entry_stage
    payload = StagePayload(request_id=request_id, data=dict(data))
    trace: dict[str, Any] = {}
    emitted: dict[str, list[Any]] = {}
    pending_chunks: list[Any] | None = None
    while True:
        stage_spec = by_name[name]
        ctx = FakeCtx(request_id, name)
        if pending_chunks is not None and hasattr(stages[name], "consume"):
            ctx.upstream_payload = payload
            out = stages[name].consume(iter(pending_chunks), ctx)
        else:
            out = stages[name].process(payload, ctx)
        trace[name] = out
        emitted[name] = ctx.emitted
        if stage_spec.terminal:
            audio_chunks = [c["audio"] for c in ctx.emitted]
            rate = {c["sample_rate"] for c in ctx.emitted}
            assert len(rate) == 1, f"chunks disagree on sample_rate: {rate}"
            return Result(torch.cat(audio_chunks, dim=-1), rate.pop(), out, ctx.emitted, trace, emitted)
        nxt = stage_spec.next[0]
        stream_to = stage_spec.stream_to
        pending_chunks = ctx.emitted if nxt in stream_to else None
        if pending_chunks is None:
            assert not ctx.emitted, f"stage {name} emitted chunks but streams to no next stage"
        payload, name = out, nxt
