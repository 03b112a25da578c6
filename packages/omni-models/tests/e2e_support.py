"""Shared pieces of the end-to-end and wire-contract tests.

``SPEC`` is the spec's "Applicability by Model" table plus the package README's registered-models table
(default processes, output format), written down once so every test checks the
shipped pipelines against the documents, not against themselves.

Also here: planning a split along one edge (keeping process-local groups whole
and declaring the GPU fractions that make the sharing legal), running
``omni-compile`` as a user would, and a probe stage that records, in the process
where it runs, exactly what a handoff delivered (safetensors + JSON, no pickle).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from omni_compiler.splits import local_groups

# -- the spec's table ------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    model_id: str
    folder: str
    default_processes: dict[str, tuple[str, ...]]
    """Declared process -> its stages, as the pipeline files declare them by default."""
    local_edges: dict[tuple[str, str], str]
    """Process-local edge -> a fragment its reason must contain (the spec's wording)."""
    sample_rate: int
    channels: int
    alt_overrides: tuple[str, ...]
    """One split or regrouped topology used for end-to-end synthesis."""


_COMPAT = "compatibility guard"
_QUEUE = "PreparedRequestQueue"
_PREPARED = "_PREPARED_REQUESTS"

SPEC: tuple[ModelSpec, ...] = (
    ModelSpec(
        "bosonai/higgs-tts-3-4b",
        "higgs_tts",
        {"tts_frontend": ("preprocessing", "audio_encoder"), "pipeline": ("tts_engine",), "vocoder": ("vocoder",)},
        {},
        24_000,
        1,
        ("--stages.preprocessing.process", "pipeline", "--stages.audio_encoder.process", "pipeline"),
    ),
    ModelSpec(
        "fishaudio/s2-pro",
        "fishaudio_s2_pro",
        {"preprocessing": ("preprocessing",), "pipeline": ("tts_engine", "vocoder")},
        {},
        44_100,
        1,
        ("--stages.preprocessing.process", "pipeline"),
    ),
    ModelSpec(
        "mistralai/voxtral-tts",
        "voxtral_tts",
        {"pipeline": ("preprocessing", "tts_generation", "vocoder")},
        {("preprocessing", "tts_generation"): _COMPAT},
        24_000,
        1,
        ("--stages.vocoder.process", "vocoder"),
    ),
    ModelSpec(
        "inclusionai/ming-omni-tts",
        "ming_omni_tts",
        {"pipeline": ("preprocessing", "reference_encode", "tts_engine", "audio_decode")},
        {("preprocessing", "reference_encode"): _COMPAT, ("reference_encode", "tts_engine"): _COMPAT},
        44_100,
        1,
        ("--stages.audio_decode.process", "decoder"),
    ),
    ModelSpec(
        "openmoss/moss-tts-local",
        "moss_tts_local",
        {"pipeline": ("preprocessing", "tts_engine"), "vocoder": ("vocoder",)},
        {("preprocessing", "tts_engine"): _QUEUE},
        48_000,
        2,
        ("--stages.vocoder.process", "pipeline"),
    ),
    ModelSpec(
        "openmoss/moss-tts-local-split",
        "moss_tts_local",
        {"pipeline": ("preprocessing", "tts_engine", "vocoder")},
        {("preprocessing", "tts_engine"): _QUEUE, ("tts_engine", "vocoder"): "cuda:1"},
        48_000,
        2,
        ("--stages.preprocessing.process", "moss", "--stages.tts_engine.process", "moss", "--stages.vocoder.process", "moss"),
    ),
    ModelSpec(
        "qwen/qwen3-tts",
        "qwen3_tts",
        {"pipeline": ("preprocessing", "tts_engine", "vocoder")},
        {("preprocessing", "tts_engine"): _PREPARED},
        24_000,
        1,
        ("--stages.vocoder.process", "vocoder"),
    ),
    ModelSpec(
        "openmoss/moss-tts-delay",
        "moss_tts_delay",
        {"pipeline": ("preprocessing", "tts_engine", "vocoder")},
        {("preprocessing", "tts_engine"): _QUEUE},
        24_000,
        1,
        ("--stages.vocoder.process", "vocoder"),
    ),
    ModelSpec(
        "audar/audar-tts",
        "audar_tts",
        {"pipeline": ("preprocessing", "reference_encoder", "tts_engine", "vocoder")},
        {},
        24_000,
        1,
        ("--stages.vocoder.process", "vocoder"),
    ),
    ModelSpec(
        "funaudiollm/fun-cosyvoice3",
        "fun_cosyvoice3",
        {"pipeline": ("preprocessing", "tts_engine", "vocoder")},
        {("preprocessing", "tts_engine"): _PREPARED},
        24_000,
        1,
        ("--stages.vocoder.process", "vocoder"),
    ),
    ModelSpec(
        "zyphra/zonos2",
        "zonos2",
        {"pipeline": ("preprocessing", "speaker_encode", "tts_engine", "vocoder")},
        {},
        44_100,
        1,
        ("--stages.vocoder.process", "vocoder"),
    ),
    ModelSpec(
        "omni/espeak",
        "espeak",
        {"pipeline": ("preprocessing", "tts_engine", "vocoder")},
        {},
        24_000,
        1,
        ("--stages.tts_engine.process", "engine", "--stages.vocoder.process", "vocoder"),
    ),
)

SPEC_BY_ID = {spec.model_id: spec for spec in SPEC}
MODEL_IDS = tuple(spec.model_id for spec in SPEC)


def load(model_id: str, overrides: Sequence[str] = ()) -> Any:
    from omni_config import load_model

    return load_model(model_id, list(overrides))


def compile_model(model_id: str, overrides: Sequence[str] = ()) -> Any:
    from omni_compiler import compile as compile_topology

    return compile_topology(load(model_id, overrides))


def config_class(model_id: str) -> Any:
    """The model's config class (``omni_models.<folder>.config``), found by its ``model_id``."""
    from omni_models.common.config import ModelConfig

    module = importlib.import_module(f"omni_models.{SPEC_BY_ID[model_id].folder}.config")
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, ModelConfig) and getattr(value, "model_id", None) == model_id:
            return value
    raise AssertionError(f"omni_models.{SPEC_BY_ID[model_id].folder}.config has no ModelConfig subclass with model_id {model_id!r}")


# -- split planning ------------------------------------------------------------------------


def pipeline_edges(config: Any) -> list[tuple[str, str]]:
    edges: dict[tuple[str, str], None] = {}
    for stage in config.stages:
        for dst in [*stage.next, *stage.stream_to]:
            edges[(stage.name, dst)] = None
        for src in stage.wait_for:
            edges[(src, stage.name)] = None
    return list(edges)


def split_along(config: Any, src: str, dst: str) -> list[str]:
    """Overrides that move ``dst`` (with its process-local group and everything after it in
    the same process) into a new process, so the edge ``src -> dst`` crosses processes."""
    process_of = {s.name: s.process or s.name for s in config.stages}
    order = [s.name for s in config.stages]
    groups = [set(g) for g in local_groups(config)]
    group = next(g for g in groups if dst in g)
    moved = {n for n in order[order.index(dst) :] if process_of[n] == process_of[dst]} | group
    for g in groups:
        if g & moved:
            moved |= g
    target = f"split_{dst}"
    return [token for name in order if name in moved for token in (f"--stages.{name}.process", target)]


# -- CLI -------------------------------------------------------------------------------------


def omni_compile(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``omni-compile ARGS`` exactly as a user runs it (the console script's module)."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from omni_compiler.cli import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def omni(*args: str, timeout: float = 300.0, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``omni ARGS`` exactly as a user runs it."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from omni_runtime.cli import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )


# -- probe stage -------------------------------------------------------------------------------


def _flatten(value: Any, path: str, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        tensors[path] = value.detach().cpu().contiguous()
        return {"__tensor__": path}
    if isinstance(value, dict):
        return {str(k): _flatten(v, f"{path}.{k}", tensors) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return {"__seq__": [_flatten(v, f"{path}.{i}", tensors) for i, v in enumerate(value)]}
    if isinstance(value, bytes):
        return {"__bytes__": value.hex()}
    return value


def record_payload(directory: Path, name: str, data: dict[str, Any]) -> None:
    """Write ``data`` as ``<name>.json`` (structure and plain values) and ``<name>.safetensors``."""
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    tree = _flatten(data, "data", tensors)
    directory.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(directory / f"{name}.safetensors"))
    (directory / f"{name}.json").write_text(json.dumps(tree, sort_keys=True))


def read_recording(directory: Path, name: str) -> tuple[Any, dict[str, torch.Tensor]]:
    from safetensors.torch import load_file

    return json.loads((directory / f"{name}.json").read_text()), load_file(str(directory / f"{name}.safetensors"))


def _takes_ctx(fn: Any) -> bool:
    import inspect

    return len(inspect.signature(fn).parameters) >= 2


class Probe:
    """Wraps a real stage: records the payload it receives (in its own process), then runs it."""

    def __init__(self, inner: Any, directory: Path, stage_name: str) -> None:
        self.inner = inner
        self.directory = directory
        self.stage_name = stage_name
        self._with_ctx = _takes_ctx(inner.process)

    def record(self, payload: Any) -> None:
        import os

        record_payload(self.directory, f"{self.stage_name}-received", payload.data)
        (self.directory / f"{self.stage_name}-received.pid").write_text(str(os.getpid()))

    def process(self, payload: Any, ctx: Any) -> Any:
        self.record(payload)
        return self.inner.process(payload, ctx) if self._with_ctx else self.inner.process(payload)


class ConsumingProbe(Probe):
    """A probe around a stage that can also consume a stream: the stream passes through untouched."""

    def consume(self, chunks: Any, ctx: Any) -> Any:
        return self.inner.consume(chunks, ctx)


class AsyncProbe(Probe):
    async def process(self, payload: Any, ctx: Any) -> Any:  # type: ignore[override]
        self.record(payload)
        return await (self.inner.process(payload, ctx) if self._with_ctx else self.inner.process(payload))


def build_probe(
    inner: str,
    record_dir: str,
    stage_name: str,
    inner_args: dict[str, Any] | None = None,
    device: str | None = None,
    gpu_id: int | None = None,
    model_path: str | None = None,
) -> Probe:
    """Factory of :class:`Probe`; ``inner`` is the real stage's factory path. The runtime's
    extras (stage_name, device, gpu_id, model_path) are forwarded where the inner factory names them."""
    import inspect

    module, _, attr = inner.partition(":")
    factory = getattr(importlib.import_module(module), attr)
    extras = {"stage_name": stage_name, "device": device, "gpu_id": gpu_id, "model_path": model_path}
    named = inspect.signature(factory).parameters
    kwargs = {**{k: v for k, v in extras.items() if k in named}, **(inner_args or {})}
    stage = factory(**kwargs)
    if not hasattr(stage, "process"):
        raise TypeError(f"the probe wraps stages with process(); {inner} returned {type(stage).__name__}")
    if inspect.iscoroutinefunction(stage.process):
        if hasattr(stage, "consume"):
            raise TypeError(f"the probe does not wrap async stages that also consume streams ({inner})")
        cls: type[Probe] = AsyncProbe
    else:
        cls = ConsumingProbe if hasattr(stage, "consume") and not inspect.iscoroutinefunction(stage.consume) else Probe
    return cls(stage, Path(record_dir), stage_name)


def with_probes(config: Any, stages: Iterable[str], record_dir: Path) -> Any:
    """The model config with each named stage wrapped in a :class:`Probe` (a model-tier edit,
    so it is made on the config value, never through overrides)."""
    wanted = set(stages)
    new_stages = []
    for stage in config.stages:
        if stage.name in wanted:
            stage = stage.model_copy(
                update={
                    "factory": "e2e_support:build_probe",
                    "factory_args": {
                        "inner": stage.factory,
                        "inner_args": dict(stage.factory_args),
                        "record_dir": str(record_dir),
                    },
                }
            )
        new_stages.append(stage)
    return config.model_copy(update={"stages": new_stages})


def without_guards(config: Any, guards: Iterable[tuple[str, str]]) -> Any:
    """The model config minus the named process-local entries (what a rollout would change)."""
    drop = set(guards)
    kept = [e for e in config.process_local_edges if (e.src, e.dst) not in drop]
    assert len(kept) == len(config.process_local_edges) - len(drop), f"{drop} are not all declared"
    return config.model_copy(update={"process_local_edges": kept})


# -- audio checks ------------------------------------------------------------------------------------


def expected_seconds(text: str, speed: float = 1.0) -> float:
    """The duration a text asks for at an ordinary speaking rate (~15 characters per second)."""
    return len(text) / 15.0 / speed


def audio_of(result: dict[str, Any]) -> tuple[torch.Tensor, int]:
    audio = result["audio"]
    return audio, int(result["sample_rate"])
