"""Drive a model's stages in-process, without the runtime: call the factories named in the
pipeline file directly and route payloads and streamed chunks the way the stage contract says."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import torch
import yaml

from omni_runtime import StagePayload


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


def load_yaml(folder: str, variant: str = "pipeline") -> dict[str, Any]:
    """The pipeline file as the installed package ships it (no path into a source checkout)."""
    return yaml.safe_load(resources.files(f"omni_models.{folder}").joinpath(f"{variant}.yaml").read_text())


def factory(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def build_stages(folder: str, variant: str = "pipeline", overrides: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    spec = load_yaml(folder, variant)
    built = {}
    for stage in spec["stages"]:
        args = {**stage.get("factory_args", {}), **(overrides or {}).get(stage["name"], {})}
        built[stage["name"]] = factory(stage["factory"])(**args)
    return built


@dataclass
class Result:
    audio: torch.Tensor
    sample_rate: int
    final: Any
    chunks: list[Any]
    trace: dict[str, Any]
    emitted: dict[str, list[Any]]


def synthesize(folder: str, data: dict[str, Any], *, variant: str = "pipeline", stages: dict[str, Any] | None = None, request_id: str = "req-1") -> Result:
    """Run one request through every stage in topological order, in this process."""
    spec = load_yaml(folder, variant)
    stages = stages or build_stages(folder, variant)
    by_name = {s["name"]: s for s in spec["stages"]}
    name = spec.get("entry_stage") or spec["stages"][0]["name"]
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
        if stage_spec.get("terminal"):
            audio_chunks = [c["audio"] for c in ctx.emitted]
            rate = {c["sample_rate"] for c in ctx.emitted}
            assert len(rate) == 1, f"chunks disagree on sample_rate: {rate}"
            return Result(torch.cat(audio_chunks, dim=-1), rate.pop(), out, ctx.emitted, trace, emitted)
        nxt = stage_spec.get("next")
        nxt = nxt[0] if isinstance(nxt, list) else nxt
        stream_to = stage_spec.get("stream_to") or []
        stream_to = [stream_to] if isinstance(stream_to, str) else stream_to
        pending_chunks = ctx.emitted if nxt in stream_to else None
        if pending_chunks is None:
            assert not ctx.emitted, f"stage {name} emitted chunks but streams to no next stage"
        payload, name = out, nxt
