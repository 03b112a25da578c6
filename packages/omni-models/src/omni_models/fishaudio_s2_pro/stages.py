"""FishAudio S2-Pro stages.

preprocessing  (CPU) text normalisation + byte tokens, limits, voice, and the reference
               recording resampled to 44.1 kHz, all in the payload
tts_engine     encodes the reference with the codec encoder into prompt codes, then the slow AR
               transformer (KV cache) predicts the semantic codebook per ~21.5 Hz frame and the
               fast AR transformer the 9 residual codebooks; 10 codebooks streamed to the vocoder
vocoder        codec decoder: 10 codebooks -> 44.1 kHz mono, streamed to the client
"""

from __future__ import annotations

from typing import Any

import torch

from omni_models.common.ar import ARConfig
from omni_models.common.audio import VOICES as VOICES  # the preset voices omni serve lists (GET /v1/audio/voices)
from omni_models.common.codec import CodecConfig
from omni_models.common.components import Component, Loader, build_ar, build_codec_decoder, build_codec_encoder, build_rvq
from omni_models.common.preprocessing import ReferencePreprocessing
from omni_models.common.request import TextRequest
from omni_models.common.sampling import SamplingParams
from omni_models.common.scheduler import DEFAULT_MAX_BATCH_SIZE, BatchLimits
from omni_models.common.stages import AREngine, AudioFormat, CodecVocoder, require, with_data
from omni_models.common.weights import DEFAULT_SEED

MODEL = "fishaudio_s2_pro"
CODEC = CodecConfig(sample_rate=44100, hop=2048, channels=1, latent_dim=64, num_codebooks=10, codebook_size=1024)
AR = ARConfig(num_codebooks=10, codebook_size=1024, layout="depth", max_seq_len=2048)
MAX_CHARS = 400
MAX_SECONDS = 30.0


def components() -> dict[str, Component]:
    return {
        "codec.encoder": (build_codec_encoder, CODEC),
        "codec.quantizer": (build_rvq, CODEC),
        "codec.decoder": (build_codec_decoder, CODEC),
        "dual_ar": (build_ar, AR),
    }


class TTSEngine:
    def __init__(self, engine: AREngine, loader: Loader):
        self.engine = engine
        self.device = loader.device
        self.encoder = loader.get(components(), "codec.encoder")
        self.quantizer = loader.get(components(), "codec.quantizer")

    def process(self, payload: Any, ctx: Any) -> Any:
        request = TextRequest.from_data(payload.data)
        wave = require(payload.data, "ref_wave", MODEL, "tts_engine")
        prompt_codes = None
        if wave is not None:
            with torch.inference_mode():
                prompt_codes = self.quantizer.encode(self.encoder(wave.to(self.device)))
        total = self.engine.stream(ctx, request, self.engine.model.voice(request.voice_index), prompt_codes)
        return with_data(payload, {"num_frames": total, "frame_rate": CODEC.frame_rate})


def build_preprocessing() -> ReferencePreprocessing:
    return ReferencePreprocessing(CODEC.frame_rate, CODEC.sample_rate, MAX_CHARS, MAX_SECONDS)


def build_tts_engine(
    load_format: str = "dummy",
    model_path: str | None = None,
    seed: int = DEFAULT_SEED,
    device: str | None = None,
    num_threads: int | None = 1,
    chunk_frames: int = 8,
    first_chunk_frames: int = 3,
    temperature: float = 0.8,
    top_k: int = 50,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_batch_tokens: int | None = None,
) -> TTSEngine:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    engine = AREngine(
        model_name=MODEL, model=loader.get(components(), "dual_ar"), seed=seed, params=SamplingParams(temperature, top_k),
        chunk_frames=chunk_frames, first_chunk_frames=first_chunk_frames, batching=BatchLimits(max_batch_size, max_batch_tokens), stage="tts_engine",
    )
    return TTSEngine(engine, loader)


def build_vocoder(load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1, max_batch_size: int | None = None) -> CodecVocoder:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    quantizer = loader.get(components(), "codec.quantizer")
    return CodecVocoder(
        max_batch_size=max_batch_size,
        model=MODEL, stage="vocoder", frontend=lambda first_chunk: quantizer.decode,
        decoder=loader.get(components(), "codec.decoder"),
        audio=AudioFormat(CODEC.sample_rate, CODEC.channels), device=loader.device,
    )
