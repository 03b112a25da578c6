"""Higgs-TTS stages.

preprocessing  text normalisation + byte tokens, generation limits, voice, and the reference
               recording as a 24 kHz waveform tensor in the payload
audio_encoder  the audio tokenizer's encoder: reference waveform -> 8 RVQ codes per 25 Hz frame
tts_engine     AR transformer (KV cache) over [voice, text, reference codes], generating 8
               codebooks in the delay pattern, streamed to the vocoder as aligned frames
vocoder        the audio tokenizer's decoder: codes -> 24 kHz mono, streamed to the client
"""

from __future__ import annotations

from typing import Any

import torch

from omni_models.common.ar import ARConfig
from omni_models.common.audio import VOICES as VOICES  # the preset voices omni serve lists (GET /v1/audio/voices)
from omni_models.common.codec import CodecConfig
from omni_models.common.components import Component, Loader, build_ar, build_codec_decoder, build_codec_encoder, build_rvq
from omni_models.common.playback import Schedule
from omni_models.common.preprocessing import ReferencePreprocessing
from omni_models.common.request import TextRequest
from omni_models.common.sampling import SamplingParams
from omni_models.common.scheduler import DEFAULT_MAX_BATCH_SIZE, BatchLimits
from omni_models.common.stages import AREngine, AudioFormat, CodecVocoder, require, with_data
from omni_models.common.weights import DEFAULT_SEED

MODEL = "higgs_tts"
CODEC = CodecConfig(sample_rate=24000, hop=960, channels=1, latent_dim=64, num_codebooks=8, codebook_size=1024)
AR = ARConfig(num_codebooks=8, codebook_size=1024, layout="delay", max_seq_len=2048)
MAX_CHARS = 400
MAX_SECONDS = 30.0


def components() -> dict[str, Component]:
    return {
        "audio_tokenizer.encoder": (build_codec_encoder, CODEC),
        "audio_tokenizer.quantizer": (build_rvq, CODEC),
        "audio_tokenizer.decoder": (build_codec_decoder, CODEC),
        "llm": (build_ar, AR),
    }


class AudioEncoder:
    def __init__(self, loader: Loader):
        self.device = loader.device
        self.encoder = loader.get(components(), "audio_tokenizer.encoder")
        self.quantizer = loader.get(components(), "audio_tokenizer.quantizer")

    @torch.inference_mode()
    def process(self, payload: Any, ctx: Any = None) -> Any:
        data = dict(payload.data)
        wave = require(data, "ref_wave", MODEL, "audio_encoder")
        if wave is None:
            codes = torch.zeros(CODEC.num_codebooks, 0, dtype=torch.long)
        else:
            codes = self.quantizer.encode(self.encoder(wave.to(self.device))).cpu()
        del data["ref_wave"]
        data["ref_codes"] = codes
        return with_data(payload, data)


class TTSEngine:
    def __init__(self, engine: AREngine):
        self.engine = engine

    def process(self, payload: Any, ctx: Any) -> Any:
        request = TextRequest.from_data(payload.data)
        ref_codes = require(payload.data, "ref_codes", MODEL, "tts_engine")
        total = self.engine.stream(ctx, request, self.engine.model.voice(request.voice_index), ref_codes)
        return with_data(payload, {"num_frames": total, "frame_rate": CODEC.frame_rate})


def build_preprocessing() -> ReferencePreprocessing:
    return ReferencePreprocessing(CODEC.frame_rate, CODEC.sample_rate, MAX_CHARS, MAX_SECONDS)


def build_audio_encoder(load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1) -> AudioEncoder:
    return AudioEncoder(Loader.create(load_format, model_path, seed, device, num_threads))


def build_tts_engine(
    load_format: str = "dummy",
    model_path: str | None = None,
    seed: int = DEFAULT_SEED,
    device: str | None = None,
    num_threads: int | None = 1,
    chunk_frames: int = 12,
    first_chunk_frames: int = 4,
    temperature: float = 0.8,
    top_k: int = 50,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_batch_tokens: int | None = None,
    scheduler: str = "deadline",
    busy_first_chunk_frames: int = 1,
) -> TTSEngine:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    return TTSEngine(
        AREngine(
            model_name=MODEL, model=loader.get(components(), "llm"), seed=seed, params=SamplingParams(temperature, top_k),
            chunk_frames=chunk_frames, first_chunk_frames=first_chunk_frames, batching=BatchLimits(max_batch_size, max_batch_tokens), stage="tts_engine",
            schedule=Schedule(scheduler, busy_first_chunk_frames, frame_rate=CODEC.frame_rate),
        )
    )


def build_vocoder(load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1, max_batch_size: int | None = None, scheduler: str = "deadline") -> CodecVocoder:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    quantizer = loader.get(components(), "audio_tokenizer.quantizer")
    return CodecVocoder(
        max_batch_size=max_batch_size, scheduler=scheduler,
        model=MODEL,
        stage="vocoder",
        frontend=lambda first_chunk: quantizer.decode,
        decoder=loader.get(components(), "audio_tokenizer.decoder"),
        audio=AudioFormat(CODEC.sample_rate, CODEC.channels),
        device=loader.device,
    )
