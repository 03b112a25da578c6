"""Stages of the real Higgs-TTS pipeline (the published ``bosonai/higgs-tts-3-4b`` checkpoint).

preprocessing  the text prompt's token ids around the reference block (``tokenizer.json``),
               generation limits, sampling fields, the reference recording at 24 kHz
audio_encoder  the Higgs Audio v2 tokenizer's encoder: reference waveform -> codes ``[N, T]`` (an
               uploaded or inline voice: encoded once, then read from the voice cache)
tts_engine     the Qwen3 backbone under continuous batching, streaming aligned frames
vocoder        the tokenizer's decoder, streamed chunk by chunk with left context

Every handoff is plain data in ``StagePayload.data`` (ids, tensors), so no edge is process-local.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from omni_models.common.audio import reference_recording
from omni_models.common.limits import GenerationLimits
from omni_models.common.playback import Schedule
from omni_models.common.request import request_sampling
from omni_models.common.sampling import generator_for, request_seed
from omni_models.common.scheduler import DEFAULT_MAX_BATCH_SIZE, BatchLimits, StepScheduler
from omni_models.common.stages import AudioFormat, emit_codes, is_cancelled, require, with_data
from omni_models.common.voice_cache import reference_artefacts, voice_fields
from omni_models.common.weights import resolve_device
from omni_runtime.errors import InvalidRequest, StageConfigError

from .codec import CodecShape, receptive_frames
from .engine import AUDIO_PLACEHOLDER, HiggsBatch, HiggsSamplingParams
from .loading import load_backbone, load_higgs_codec, open_checkpoint, require_path
from .resample import resample
from .streaming import HiggsVocoder
from .text import HiggsTokenizer

MODEL = "bosonai/higgs-tts-3-4b"
MAX_CHARS = 2000
MAX_SECONDS = 60.0
#: The published streaming vocoder's left overlap and hold-back, in frames; omni's defaults
#: are the decoder's exact receptive field on both sides instead (see ``streaming``).
REFERENCE_CONTEXT_FRAMES = 8
REFERENCE_HOLDBACK_FRAMES = 4
#: The encoder zero-pads a reference shorter than this (as the published codec wrapper does).
MIN_REFERENCE_SECONDS = 1.0


def reference_wave(data: dict[str, Any], rate: int) -> torch.Tensor | None:
    """The request's ``ref_audio`` (WAV bytes, or a tensor with ``ref_sample_rate``) as mono
    float32 at ``rate`` (windowed-sinc resampling), not normalised."""
    recording = reference_recording(data)
    if recording is None:
        return None
    audio, source_rate = recording
    return resample(audio.mean(dim=0), source_rate, rate).contiguous()


class HiggsPreprocessing:
    def __init__(self, model_path: str):
        ckpt = open_checkpoint(model_path)
        self.tokenizer = HiggsTokenizer(ckpt.root / "tokenizer.json")
        codec = CodecShape.from_config(ckpt.codec_config)
        self.sample_rate = codec.sample_rate
        # rows: frames at the codec's rate plus the delay pattern's N - 1 extra rows
        self.max_rows = math.ceil(MAX_SECONDS * codec.frame_rate) + ckpt.audio.num_codebooks - 1

    def process(self, payload: Any, ctx: Any = None) -> Any:
        data = payload.data
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InvalidRequest("text must be a non-empty string", param="text")
        if len(text) > MAX_CHARS:
            raise InvalidRequest(f"text is {len(text)} characters; the limit is {MAX_CHARS}", param="text")
        ref_text = data.get("ref_text")
        if ref_text is not None and not isinstance(ref_text, str):
            raise InvalidRequest("ref_text must be a string", param="ref_text")
        cap = self.max_rows
        requested = data.get("max_new_tokens")
        if requested is not None and (isinstance(requested, bool) or not isinstance(requested, int) or requested < 1):
            raise InvalidRequest(f"max_new_tokens must be a positive integer, got {requested!r}", param="max_new_tokens")
        rows = min(cap, requested or cap)  # the engine trims the default cap to its context, never an explicit request
        prefix, suffix = self.tokenizer.prompt_parts(text.strip(), ref_text)
        top_p = data.get("top_p")
        if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1):
            raise InvalidRequest(f"top_p must be a number in (0, 1], got {top_p!r}", param="top_p")
        out = {
            "text": text, "top_p": None if top_p is None else float(top_p), "prefix_ids": prefix, "suffix_ids": suffix, "zero_shot_ids": self.tokenizer.zero_shot(text.strip()),
            "limits": GenerationLimits(0, rows).to_dict(), "explicit_max": requested is not None, "seed": request_seed(data), **request_sampling(data),
            "ref_wave": reference_wave(data, self.sample_rate), **voice_fields(data),
        }
        return with_data(payload, out)


class HiggsAudioEncoder:
    def __init__(self, model_path: str, device: str):
        self.codec = load_higgs_codec(model_path, device, True)
        self.device = device

    @torch.inference_mode()
    def process(self, payload: Any, ctx: Any = None) -> Any:
        data = dict(payload.data)
        wave = require(data, "ref_wave", MODEL, "audio_encoder")
        found = reference_artefacts(data, wave, lambda ref: {"ref_codes": self.encode(ref)}, dict)  # a preset voice: no codes
        del data["ref_wave"]
        data["ref_codes"] = found.get("ref_codes")
        return with_data(payload, data)

    def encode(self, wave: torch.Tensor) -> torch.Tensor:
        """The reference's codes ``[N, T]`` (a reference under a second zero-padded to one)."""
        minimum = int(MIN_REFERENCE_SECONDS * self.codec.shape.sample_rate)
        wave = F.pad(wave, (0, max(0, minimum - wave.shape[-1])))
        return self.codec.encode(wave.to(self.device)).cpu()


def prompt_ids(data: dict[str, Any], ref_codes: torch.Tensor | None) -> list[int]:
    """The prompt around ``T + N - 1`` reference placeholders, or the zero-shot prompt."""
    if ref_codes is None:
        return list(data["zero_shot_ids"])
    rows = ref_codes.shape[1] + ref_codes.shape[0] - 1
    return [*data["prefix_ids"], *([AUDIO_PLACEHOLDER] * rows), *data["suffix_ids"]]


class HiggsEngine:
    """``process`` submits one request to the running batch and streams its frames."""

    def __init__(self, batch: HiggsBatch, params: HiggsSamplingParams, limits: BatchLimits, chunking: tuple[int, int], seed: int, schedule: Schedule | None = None):
        self.batch, self.params, self.chunking, self.seed = batch, params, chunking, seed
        self.scheduler = StepScheduler(None, name=f"{MODEL} tts_engine", limits=limits, batch=batch, schedule=schedule)

    def _limits(self, data: dict[str, Any], prompt_len: int) -> GenerationLimits:
        """The request's row cap; the default one shrinks to the context the prompt leaves, an
        explicit ``max_new_tokens`` that does not fit is the client's error."""
        limits = GenerationLimits.from_dict(data["limits"])
        room = self.batch.config.max_seq_len - prompt_len
        if limits.max_new_tokens <= room:
            return limits
        if data.get("explicit_max") or room < self.batch.config.num_codebooks:
            raise InvalidRequest(
                f"a prompt of {prompt_len} positions plus max_new_tokens {limits.max_new_tokens} exceeds the engine's context of "
                f"{self.batch.config.max_seq_len}; lower max_new_tokens to {max(room, 0)} or less, or shorten the text or reference audio",
                param="max_new_tokens",
            )
        return GenerationLimits(0, room)

    def process(self, payload: Any, ctx: Any) -> Any:
        data = payload.data
        ref_codes = require(data, "ref_codes", MODEL, "tts_engine")
        prompt = self.batch.prompt(prompt_ids(data, ref_codes), ref_codes)
        temperature, top_k, top_p = data.get("temperature"), data.get("top_k"), data.get("top_p")
        params = HiggsSamplingParams(
            self.params.temperature if temperature is None else temperature, self.params.top_k if top_k is None else top_k,
            self.params.top_p if top_p is None else top_p,
        )
        frames = self.scheduler.submit(
            prompt, self._limits(data, prompt.shape[1]), params, generator_for(self.seed, data["seed"], MODEL),
            cancelled=lambda: is_cancelled(ctx), deadline=getattr(ctx, "deadline", None), chunking=self.chunking,
            on_start=getattr(ctx, "record_queue_wait", None),
        )
        try:
            total = emit_codes(ctx, frames.chunks())
        finally:
            frames.cancel()
        return with_data(payload, {"num_frames": total})


class StreamingCodecDecoder(nn.Module):
    """The codec decoder as ``HiggsVocoder`` drives it: latents ``[(B,) dim, T]`` -> audio, with
    ``context_frames`` of left context per chunk."""

    def __init__(self, codec: Any, context_frames: int):
        super().__init__()
        self.codec = codec
        self.hop = codec.shape.hop
        self.out_channels = 1
        self.context_frames = context_frames

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        return self.codec.decode_latents(latents)


def build_preprocessing(load_format: str = "safetensors", model_path: str | None = None) -> HiggsPreprocessing:
    return HiggsPreprocessing(require_path(model_path, load_format))


def build_audio_encoder(load_format: str = "safetensors", model_path: str | None = None, device: str | None = None, num_threads: int | None = None) -> HiggsAudioEncoder:
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    return HiggsAudioEncoder(require_path(model_path, load_format), resolve_device(device))


def build_tts_engine(
    load_format: str = "safetensors",
    model_path: str | None = None,
    device: str | None = None,
    dtype: str = "auto",
    seed: int = 1234,
    temperature: float = 0.7,
    top_k: int = 50,
    top_p: float = 1.0,
    chunk_frames: int = 25,
    first_chunk_frames: int = 8,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_batch_tokens: int | None = None,
    max_seq_len: int = 8192,
    num_threads: int | None = None,
    scheduler: str = "deadline",
    busy_first_chunk_frames: int = 1,
) -> HiggsEngine:
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    path = require_path(model_path, load_format)
    device = resolve_device(device)
    if dtype == "auto":  # the published weights are bfloat16; the CPU runs float32 (parity is proven there)
        dtype = "bfloat16" if str(device).startswith("cuda") else "float32"
    batch = HiggsBatch(load_backbone(path, device, dtype), max_seq_len)
    # HiggsBatch has neither join_many nor step(only=...): under deadline its prefills run one at a
    # time and every row steps; streams are still admitted first and their first chunk ramps
    schedule = Schedule(scheduler, busy_first_chunk_frames, frame_rate=CodecShape.from_config(open_checkpoint(path).codec_config).frame_rate)
    return HiggsEngine(batch, HiggsSamplingParams(temperature, top_k, top_p), BatchLimits(max_batch_size, max_batch_tokens), (first_chunk_frames, chunk_frames), seed, schedule)


def build_vocoder(
    load_format: str = "safetensors",
    model_path: str | None = None,
    device: str | None = None,
    max_batch_size: int | None = None,
    context_frames: int | None = None,
    lookahead_frames: int | None = None,
    num_threads: int | None = None,
) -> HiggsVocoder:
    """``context_frames`` / ``lookahead_frames``: left context and held-back right context per
    streamed chunk; None is the decoder's receptive field (streamed audio equals a full decode).
    Smaller values lower the first chunk's latency at the cost of edge error at every chunk
    boundary (the published vocoder: 8 and 4; measured in the parity table)."""
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    device = resolve_device(device)
    codec = load_higgs_codec(require_path(model_path, load_format), device, False)
    exact = receptive_frames(codec.acoustic_decoder)
    for name, value in (("context_frames", context_frames), ("lookahead_frames", lookahead_frames)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise StageConfigError(name, value, f"an integer >= 0, or null (the decoder's receptive field, {exact} frames)", f"set {name} to 0 or more, or null")
    decoder = StreamingCodecDecoder(codec, exact if context_frames is None else context_frames)
    return HiggsVocoder(
        right_frames=exact if lookahead_frames is None else lookahead_frames, model=MODEL, stage="vocoder",
        frontend=lambda first_chunk: codec.latents, decoder=decoder,  # type: ignore[arg-type]
        audio=AudioFormat(codec.shape.sample_rate, 1), device=device, max_batch_size=max_batch_size,
    )
