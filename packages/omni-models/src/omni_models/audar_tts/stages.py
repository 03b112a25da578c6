"""Audar-TTS stages.

preprocessing      text normalisation + byte tokens, limits, voice, reference recording (16 kHz)
reference_encoder  speaker encoder -> ``speaker_embedding`` tensor in the payload
tts_engine         AR transformer (KV cache) generating 4 parallel codebooks per 25 Hz frame,
                   returned as ``codes`` in the payload
vocoder            codec decoder: 4 codebooks -> 24 kHz mono, decoded and streamed in chunks
"""

from __future__ import annotations

from typing import Any

from omni_models.common.ar import ARConfig
from omni_models.common.audio import VOICES as VOICES  # the preset voices omni serve lists (GET /v1/audio/voices)
from omni_models.common.codec import CodecConfig
from omni_models.common.components import Component, Loader, build_ar, build_codec_decoder, build_rvq, build_speaker_encoder
from omni_models.common.preprocessing import ReferencePreprocessing
from omni_models.common.request import TextRequest
from omni_models.common.sampling import SamplingParams
from omni_models.common.scheduler import DEFAULT_MAX_BATCH_SIZE, BatchLimits
from omni_models.common.speaker import SpeakerEncoderConfig
from omni_models.common.stages import AREngine, AudioFormat, CodecVocoder, SpeakerEncoderStage, require, with_data
from omni_models.common.weights import DEFAULT_SEED

MODEL = "audar_tts"
CODEC = CodecConfig(sample_rate=24000, hop=960, channels=1, latent_dim=64, num_codebooks=4, codebook_size=1024)
SPEAKER = SpeakerEncoderConfig(embed_dim=64)
AR = ARConfig(num_codebooks=4, codebook_size=1024, layout="parallel", cond_dim=SPEAKER.embed_dim, max_seq_len=2048)
MAX_CHARS = 400
MAX_SECONDS = 30.0


def components() -> dict[str, Component]:
    return {
        "speaker_encoder": (build_speaker_encoder, SPEAKER),
        "lm": (build_ar, AR),
        "codec.quantizer": (build_rvq, CODEC),
        "codec.decoder": (build_codec_decoder, CODEC),
    }


class TTSEngine:
    def __init__(self, engine: AREngine):
        self.engine = engine

    def process(self, payload: Any, ctx: Any) -> Any:
        request = TextRequest.from_data(payload.data)
        embedding = require(payload.data, "speaker_embedding", MODEL, "tts_engine")
        codes = self.engine.collect(ctx, request, embedding)
        return with_data(payload, {"codes": codes, "frame_rate": CODEC.frame_rate})


def build_preprocessing() -> ReferencePreprocessing:
    return ReferencePreprocessing(CODEC.frame_rate, SPEAKER.sample_rate, MAX_CHARS, MAX_SECONDS)


def build_reference_encoder(load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1) -> SpeakerEncoderStage:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    return SpeakerEncoderStage(loader.get(components(), "speaker_encoder"), loader.device, MODEL, "reference_encoder")


def build_tts_engine(
    load_format: str = "dummy",
    model_path: str | None = None,
    seed: int = DEFAULT_SEED,
    device: str | None = None,
    num_threads: int | None = 1,
    temperature: float = 0.8,
    top_k: int = 50,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_batch_tokens: int | None = None,
) -> TTSEngine:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    return TTSEngine(
        AREngine(
            model_name=MODEL, model=loader.get(components(), "lm"), seed=seed, params=SamplingParams(temperature, top_k),
            chunk_frames=1, first_chunk_frames=1, batching=BatchLimits(max_batch_size, max_batch_tokens), stage="tts_engine",
        )
    )


def build_vocoder(
    load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1, chunk_frames: int = 12
, max_batch_size: int | None = None) -> CodecVocoder:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    quantizer = loader.get(components(), "codec.quantizer")
    return CodecVocoder(
        max_batch_size=max_batch_size,
        model=MODEL, stage="vocoder", frontend=lambda first_chunk: quantizer.decode,
        decoder=loader.get(components(), "codec.decoder"),
        audio=AudioFormat(CODEC.sample_rate, CODEC.channels), device=loader.device, chunk_frames=chunk_frames,
    )
