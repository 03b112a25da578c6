"""A codec-token model as data: what differs between the models the shared stages serve.

Every codec-token model here is the same machine (a text front end, an optional reference
encoder, an AR transformer over a codebook layout, a streaming codec decoder) with different
numbers: codebooks, layout, rates, which checkpoint prefixes hold which component, how a
reference recording conditions the engine, and the defaults of the stage knobs. A
:class:`CodecTokenSpec` holds exactly those numbers, the table in ``catalog`` holds one per
model, and the factories in ``factories`` build every stage from it. A model folder keeps only
what is its own: its pipeline file (stage graph, knob declarations, the process-local contract),
its config class and, where the contract is about module state, its handoff module.

The knob dataclasses hold the Python defaults; the pipeline file declares each knob again with
its default, type and range (``factory_args`` / ``knobs``), because omni-config validates a
deployment without importing torch or this package. ``test_knobs`` checks the two agree.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from omni_runtime.errors import StageConfigError

from .ar import ARConfig
from .audio import VOICES
from .codec import CodecConfig
from .components import Component, Loader, build_ar, build_codec_decoder, build_codec_encoder, build_rvq, build_speaker_encoder
from .playback import Schedule
from .scheduler import DEFAULT_MAX_BATCH_SIZE, BatchLimits
from .speaker import SpeakerEncoderConfig
from .weights import DEFAULT_SEED


class KnobError(ValueError):
    """A factory was given a knob its stage does not have (only a direct call can; the config refuses it first)."""


@dataclass(frozen=True)
class LoaderKnobs:
    """Where a weight-bearing stage gets its weights and how many CPU threads it uses."""

    load_format: str = "dummy"
    seed: int = DEFAULT_SEED
    num_threads: int | None = 1

    def loader(self, device: str | None, model_path: str | None) -> Loader:
        return Loader.create(self.load_format, model_path, self.seed, device, self.num_threads)


@dataclass(frozen=True)
class EngineKnobs(LoaderKnobs):
    """The AR stage: chunking of the code stream, sampling defaults, continuous-batch bounds and
    the scheduling policy (``deadline``: streams by playback deadline, ``fifo``: arrival order)."""

    chunk_frames: int = 12
    first_chunk_frames: int = 4
    temperature: float = 0.8
    top_k: int = 50
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    max_batch_tokens: int | None = None
    scheduler: str = "deadline"
    busy_first_chunk_frames: int = 1

    @property
    def batching(self) -> BatchLimits:
        return BatchLimits(self.max_batch_size, self.max_batch_tokens)

    def schedule(self, frame_rate: float) -> Schedule:
        return Schedule(self.scheduler, self.busy_first_chunk_frames, frame_rate=frame_rate)


@dataclass(frozen=True)
class VocoderKnobs(LoaderKnobs):
    """The codec decoder: chunking of a non-streamed ``codes`` payload, batching, and its device."""

    chunk_frames: int = 25
    max_batch_size: int | None = None
    codec_device: str | None = None
    scheduler: str = "deadline"
    """``deadline``: decode turns by playback deadline (``DecodeGate``); ``fifo``: arrival order."""

    def codec_placement(self, model: str, device: str | None) -> str:
        """Where the codec runs: the runtime's device, except that ``codec_device`` moves it to
        another CUDA device (MOSS-TTS Local's split placement). ``--device cpu`` keeps the CPU."""
        if self.codec_device is None or device is None or device == "cpu":
            return device or "cpu"
        try:
            target = torch.device(self.codec_device)
        except (RuntimeError, TypeError):
            raise StageConfigError("codec_device", self.codec_device, f"{model}: codec_device must be a torch device such as 'cuda:1' or 'cpu'",
                                   "write the device as 'cuda:N' or 'cpu', or null for the stage's own device") from None
        if target.type == "cuda":
            count = torch.cuda.device_count()
            if (target.index or 0) >= count:
                raise StageConfigError(
                    "codec_device", self.codec_device, f"{model}: codec_device {self.codec_device!r} does not exist ({count} CUDA device(s) visible)",
                    "give the machine a second GPU, set factory_args.codec_device to an existing device, or run with --device cpu",
                )
        return str(target)


#: The knobs of each stage role, by the model's shape: chunking knobs only where they act (an
#: engine that streams; a vocoder fed whole ``codes``), ``codec_device`` where a pipeline declares it.
_LOADER = ("load_format", "seed", "num_threads")
_OPTIONAL = {"vocoder": ("codec_device",)}


def knob_names(spec: CodecTokenSpec, role: str) -> tuple[str, ...]:
    """The knobs a ``loader``, ``engine`` or ``vocoder`` stage of ``spec`` declares in its pipeline file."""
    if role == "loader":
        return _LOADER
    if role == "engine":
        chunking = ("chunk_frames", "first_chunk_frames") if spec.streams else ()
        ramp = ("busy_first_chunk_frames",) if spec.streams else ()
        return (*_LOADER, *chunking, "temperature", "top_k", "max_batch_size", "max_batch_tokens", "scheduler", *ramp)
    if role == "vocoder":
        return (*_LOADER, *(() if spec.streams else ("chunk_frames",)), "max_batch_size", "scheduler")
    raise ValueError(f"unknown stage role {role!r}")


def _defaults(spec: CodecTokenSpec, role: str) -> LoaderKnobs:
    return {"loader": LoaderKnobs(), "engine": spec.engine, "vocoder": spec.vocoder}[role]


def knob_defaults(spec: CodecTokenSpec, role: str) -> dict[str, Any]:
    """``knob_names`` with the spec's defaults: what the pipeline file's factory_args must say."""
    source = _defaults(spec, role)
    return {name: getattr(source, name) for name in knob_names(spec, role)}


def apply_knobs(defaults: Any, given: dict[str, Any], *, model: str, stage: str, names: tuple[str, ...] | None = None) -> Any:
    """``defaults`` (a knob dataclass) with the stage's ``factory_args`` applied. A knob the stage
    does not have is an error naming it (only a direct call can pass one: omni-config refuses an
    undeclared knob before start)."""
    known = names if names is not None else tuple(f.name for f in dataclasses.fields(defaults))
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise KnobError(f"{model}: stage {stage} has no knob {', '.join(map(repr, unknown))}; its knobs are {', '.join(known)}")
    return dataclasses.replace(defaults, **given)


def knobs_for(spec: CodecTokenSpec, role: str, given: dict[str, Any], stage: str) -> Any:
    """The knob values of a ``loader``, ``engine`` or ``vocoder`` stage of ``spec``."""
    return apply_knobs(_defaults(spec, role), given, model=spec.name, stage=stage, names=(*knob_names(spec, role), *_OPTIONAL.get(role, ())))


@dataclass(frozen=True)
class TextFrontEnd:
    """How text becomes a generation: the byte tokenizer, a character cap and a duration cap."""

    max_chars: int = 400
    max_seconds: float = 30.0


#: How a client's reference recording (voice cloning) reaches the AR engine:
#: ``speaker``: a speaker encoder stage turns it into ``speaker_embedding``, which conditions the engine;
#: ``codes``: the codec encoder turns it into prompt codes (in its own stage, the preprocessing, or the
#: engine itself, per ``encodes_reference_in``) and the engine is conditioned on a preset voice;
#: ``none``: the model does not clone voices (a preset voice only).
Reference = Literal["speaker", "codes", "none"]


@dataclass(frozen=True)
class CodecTokenSpec:
    """One codec-token model: the numbers its shared stages are built from."""

    name: str
    """Short name: error messages, the sampling seed stream and the handoff's model key."""
    layout: Literal["parallel", "delay", "depth"]
    codec: CodecConfig
    """Sample rate, hop (so the frame rate), channels and the codebooks of the codec."""
    lm: str
    """Checkpoint prefix of the AR transformer (``llm``, ``talker``, ...)."""
    codec_prefix: str
    """Checkpoint prefix of the codec's ``quantizer`` / ``decoder`` / ``encoder``."""
    reference: Reference
    streams: bool
    """The engine streams chunks to the vocoder (``stream_to``) rather than returning all codes."""
    speaker: SpeakerEncoderConfig | None = None
    """The speaker encoder (``reference: speaker``), checkpoint prefix ``speaker_encoder``."""
    encodes_reference_in: Literal["encoder_stage", "preprocessing", "engine", None] = None
    """Which stage runs the codec encoder on the reference (``reference: codes``)."""
    text: TextFrontEnd = field(default_factory=TextFrontEnd)
    voices: tuple[str, ...] = VOICES
    engine: EngineKnobs = field(default_factory=EngineKnobs)
    vocoder: VocoderKnobs = field(default_factory=VocoderKnobs)
    max_seq_len: int = 2048

    def __post_init__(self) -> None:
        if (self.reference == "speaker") != (self.speaker is not None):
            raise ValueError(f"{self.name}: a speaker encoder goes with reference='speaker' and only with it")
        if (self.reference == "codes") != (self.encodes_reference_in is not None):
            raise ValueError(f"{self.name}: reference='codes' needs encodes_reference_in, and only it")

    @property
    def ar(self) -> ARConfig:
        cond = {"cond_dim": self.speaker.embed_dim} if self.speaker is not None else {}
        return ARConfig(self.codec.num_codebooks, self.codec.codebook_size, self.layout, max_seq_len=self.max_seq_len, **cond)

    @property
    def frame_rate(self) -> float:
        return self.codec.frame_rate

    @property
    def reference_sample_rate(self) -> int:
        """The rate preprocessing resamples a reference recording to: its encoder's."""
        return self.speaker.sample_rate if self.speaker is not None else self.codec.sample_rate

    def components(self) -> dict[str, Component]:
        """Checkpoint component name -> (builder, config): what the stages load and ``export`` writes."""
        found: dict[str, Component] = {}
        if self.speaker is not None:
            found["speaker_encoder"] = (build_speaker_encoder, self.speaker)
        if self.reference == "codes":
            found[f"{self.codec_prefix}.encoder"] = (build_codec_encoder, self.codec)
        found[f"{self.codec_prefix}.quantizer"] = (build_rvq, self.codec)
        found[f"{self.codec_prefix}.decoder"] = (build_codec_decoder, self.codec)
        found[self.lm] = (build_ar, self.ar)
        return found

    def load(self, loader: Loader, part: str) -> Any:
        """A component by role: ``lm``, ``speaker_encoder`` or a codec part (``quantizer``...)."""
        name = self.lm if part == "lm" else part if part == "speaker_encoder" else f"{self.codec_prefix}.{part}"
        return loader.get(self.components(), name)
