"""Stage objects shared by the models: the speaker encoder, the AR engine driver and the streaming codec vocoder.

They follow docs/stage-contract.md: ``process(payload, ctx)`` returns a payload built with
``dataclasses.replace`` (so model code never constructs runtime types), a streaming producer
calls ``ctx.emit`` per chunk, a streaming consumer implements ``consume(chunks, ctx)``, and a
terminal stage streams ``{"audio", "sample_rate"}`` chunks to the client.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from .codec import CodecDecoder, StreamingDecode
from .combine import Combiner
from .playback import PlaybackClock, Schedule, decode_turn, vocoder_gate
from .sampling import SamplingParams, generator_for
from .scheduler import DEFAULT_MAX_BATCH_SIZE, BatchLimits, FrameStream, StepScheduler
from .voice_cache import reference_speaker


def with_data(payload: Any, data: dict[str, Any]) -> Any:
    """The same request's payload with new data (works for any dataclass payload type)."""
    return dataclasses.replace(payload, data=data)


def is_cancelled(ctx: Any) -> bool:
    return bool(getattr(ctx, "cancelled", False))


def require(data: dict[str, Any], key: str, model: str, stage: str) -> Any:
    """A payload field a stage needs; its absence means the upstream stage broke the contract."""
    if key not in data:
        raise RuntimeError(f"{model}: stage {stage} needs payload field {key!r}, which the upstream stage did not send")
    return data[key]


def chunk_frames(frames: Iterable[torch.Tensor], first: int, size: int) -> Iterator[tuple[int, torch.Tensor]]:
    """Group frames ``[K]`` into ``(start_frame, codes [K, n])``: a small first chunk for a fast
    first audio packet, then ``size`` frames per chunk."""
    buf: list[torch.Tensor] = []
    start = 0
    target = first
    for frame in frames:
        buf.append(frame)
        if len(buf) >= target:
            yield start, torch.stack(buf, dim=1)
            start += len(buf)
            buf, target = [], size
    if buf:
        yield start, torch.stack(buf, dim=1)


def emit_codes(ctx: Any, chunks: Iterable[torch.Tensor], *, extra: dict[str, Any] | None = None) -> int:
    """Stream code chunks ``[K, n]`` to the vocoder as ``{"codes", "start_frame"}`` (``extra``
    rides on the first chunk). Returns the number of frames sent."""
    total = 0
    for codes in chunks:
        chunk: dict[str, Any] = {"codes": codes.cpu(), "start_frame": total}
        if total == 0 and extra:
            chunk.update(extra)
        ctx.emit(chunk)
        total += codes.shape[1]
    return total


@dataclass(frozen=True)
class AudioFormat:
    sample_rate: int
    channels: int

    def shape(self, audio: torch.Tensor) -> torch.Tensor:
        """``[channels, n]`` -> the contract's ``[n]`` (mono) or ``[channels, n]``, float32 on CPU."""
        audio = audio.detach().to("cpu", torch.float32)
        return audio[0].contiguous() if self.channels == 1 else audio.contiguous()


class CodecVocoder:
    """Terminal vocoder: code chunks -> latents (``frontend``) -> streaming codec decoder -> audio.

    ``frontend(first_chunk_data)`` returns the per-request function mapping the chunk's
    ``key`` tensor (codes ``[K, n]`` or latents) to decoder input ``[dim, m]`` (an RVQ lookup,
    the identity for continuous latents, or CosyVoice3's flow-matching mel).
    As a streaming consumer it decodes each chunk as it arrives; as a plain ``next`` target it
    decodes ``data["codes"]`` in chunks of ``chunk_frames``. Either way it emits audio chunks.
    Chunks of different requests that arrive together are decoded in one forward
    (``Combiner``, up to ``max_batch_size`` chunks of one shape); each request keeps its own
    streaming context. The default batches on CUDA and not on the CPU: there the decoder's
    convolutions are already large per chunk, and measured on Qwen3-TTS's and Higgs' decoders a
    batch of 8 took as long or longer than 8 separate calls, which moreover run in parallel
    threads; ``max_batch_size`` (``factory_args``) overrides it either way.
    """

    def __init__(
        self,
        *,
        model: str,
        stage: str,
        frontend: Callable[[dict[str, Any]], Callable[[torch.Tensor], torch.Tensor]],
        decoder: CodecDecoder,
        audio: AudioFormat,
        device: str,
        chunk_frames: int = 25,
        key: str = "codes",
        max_batch_size: int | None = None,
        scheduler: str = "deadline",
    ):
        self.model, self.stage, self.key = model, stage, key
        self.frontend, self.decoder, self.audio, self.device = frontend, decoder, audio, device
        self.chunk_frames = chunk_frames
        if max_batch_size is None:
            max_batch_size = DEFAULT_MAX_BATCH_SIZE if str(device).startswith("cuda") else 1
        BatchLimits(max_batch_size).check(1, stage)
        self.combiner = Combiner(self._decode_batch, max_batch=max_batch_size) if max_batch_size > 1 else None
        self.gate = vocoder_gate(scheduler, device, self.combiner is not None)  # decode turns by playback deadline

    @torch.inference_mode()
    def _decode_batch(self, latents: torch.Tensor) -> torch.Tensor:
        return self.decoder(latents)

    def _decode(self, chunks: Iterable[dict[str, Any]], ctx: Any) -> tuple[int, int]:
        stream = StreamingDecode(self.decoder, self.combiner)  # no combiner: this thread decodes alone
        to_latents = None
        frames = samples = 0
        clock = PlaybackClock()
        for chunk in chunks:
            if is_cancelled(ctx):
                break
            codes = require(chunk, self.key, self.model, self.stage)
            if to_latents is None:
                to_latents = self.frontend(chunk)
            with torch.inference_mode(), decode_turn(self.gate, clock):
                audio = stream.push(to_latents(codes.to(self.device)))
            clock.played(audio.shape[-1] / self.audio.sample_rate)
            frames += codes.shape[1]
            samples += audio.shape[-1]
            ctx.emit({"audio": self.audio.shape(audio), "sample_rate": self.audio.sample_rate})
        return frames, samples

    def _summary(self, frames: int, samples: int) -> dict[str, Any]:
        return {
            "sample_rate": self.audio.sample_rate,
            "channels": self.audio.channels,
            "num_frames": frames,
            "num_samples": samples,
            "duration_s": samples / self.audio.sample_rate,
        }

    def consume(self, chunks: Iterable[dict[str, Any]], ctx: Any) -> Any:
        frames, samples = self._decode(chunks, ctx)
        return with_data(ctx.upstream_payload, self._summary(frames, samples))

    def process(self, payload: Any, ctx: Any) -> Any:
        data = payload.data
        codes = require(data, self.key, self.model, self.stage)
        if not isinstance(codes, torch.Tensor) or codes.dim() != 2 or codes.shape[1] == 0:
            shape = tuple(codes.shape) if isinstance(codes, torch.Tensor) else type(codes).__name__
            raise ValueError(f"{self.model}: stage {self.stage} got {self.key} of shape {shape}; expected [channels, frames > 0]")
        extra = {k: v for k, v in data.items() if k != self.key}
        pieces = (
            {**extra, self.key: codes[:, i : i + self.chunk_frames]} for i in range(0, codes.shape[1], self.chunk_frames)
        )
        frames, samples = self._decode(pieces, ctx)
        return with_data(payload, self._summary(frames, samples))


class AREngine:
    """Runs requests through the engine's continuous batch (``StepScheduler``) and either streams
    their frames to the vocoder (``stream``; the stage has ``stream_to``) or returns them
    (``collect``; a plain ``next``). The stage still sees one request per ``process`` call.

    ``params`` are the stage's sampling defaults; a request's own ``temperature``/``top_k``
    (``TextRequest``) override them for that request only.
    """

    def __init__(
        self,
        *,
        model_name: str,
        model: Any,
        seed: int,
        params: SamplingParams,
        chunk_frames: int,
        first_chunk_frames: int,
        batching: BatchLimits | None = None,
        stage: str = "tts_engine",
        schedule: Schedule | None = None,
    ):
        if chunk_frames < 1 or first_chunk_frames < 1:
            raise ValueError(f"chunk_frames and first_chunk_frames must be >= 1, got {chunk_frames} and {first_chunk_frames}")
        self.model_name, self.model, self.seed, self.params = model_name, model, seed, params
        self.chunk_frames, self.first_chunk_frames = chunk_frames, first_chunk_frames
        self.scheduler = StepScheduler(model, name=f"{model_name} {stage}", limits=batching, stage=stage, schedule=schedule)

    def params_for(self, request: Any) -> SamplingParams:
        temperature, top_k = getattr(request, "temperature", None), getattr(request, "top_k", None)
        if temperature is None and top_k is None:
            return self.params
        return SamplingParams(self.params.temperature if temperature is None else temperature, self.params.top_k if top_k is None else top_k)

    def frames(self, request: Any, cond: torch.Tensor | None, prompt_codes: torch.Tensor | None, ctx: Any, *, chunked: bool = False) -> FrameStream:
        with torch.inference_mode():
            prompt = self.model.prompt(request.input_ids, cond, prompt_codes)
        return self.scheduler.submit(
            prompt, request.limits, self.params_for(request), generator_for(self.seed, request.seed, self.model_name),
            cancelled=lambda: is_cancelled(ctx), deadline=getattr(ctx, "deadline", None),
            chunking=(self.first_chunk_frames, self.chunk_frames) if chunked else None,
            on_start=getattr(ctx, "record_queue_wait", None),
        )

    def stream(self, ctx: Any, request: Any, cond: torch.Tensor | None, prompt_codes: torch.Tensor | None = None, extra: dict[str, Any] | None = None) -> int:
        """A small first chunk (``first_chunk_frames``) for a fast first audio packet, then
        ``chunk_frames`` per chunk; the scheduler groups the frames, so this thread wakes per chunk."""
        frames = self.frames(request, cond, prompt_codes, ctx, chunked=True)
        try:
            return emit_codes(ctx, frames.chunks(), extra=extra)
        finally:
            frames.cancel()  # a caller that stops early (an emit failed) leaves the batch

    def collect(self, ctx: Any, request: Any, cond: torch.Tensor | None, prompt_codes: torch.Tensor | None = None) -> torch.Tensor:
        frames = self.frames(request, cond, prompt_codes, ctx)
        try:
            collected = list(frames)
        finally:
            frames.cancel()
        if not collected:
            raise RuntimeError(f"{self.model_name}: generation produced no audio frames")
        return torch.stack(collected, dim=1)


class SpeakerEncoderStage:
    """Reference recording (or a preset voice) -> ``speaker_embedding`` in the payload.

    The embedding travels as a float32 CPU tensor, so the edge to the engine can
    cross processes; the recording itself is dropped from the payload here. A voice
    the server keyed (``voice_key``) is embedded once and then read from the voice cache.
    """

    def __init__(self, encoder: Any, device: Any, model: str, stage: str):
        self.encoder = encoder
        self.device = device
        self.model = model
        self.stage = stage

    @torch.inference_mode()
    def process(self, payload: Any, ctx: Any = None) -> Any:
        data = dict(payload.data)
        wave = require(data, "ref_wave", self.model, self.stage)
        embedding = reference_speaker(
            data, wave, lambda ref: self.encoder(ref.to(self.device)),
            lambda: self.encoder.preset(int(require(data, "voice_index", self.model, self.stage))),
        )
        del data["ref_wave"]
        data["speaker_embedding"] = embedding.to("cpu", torch.float32).contiguous()
        return with_data(payload, data)
