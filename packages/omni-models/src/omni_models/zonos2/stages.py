"""Zonos2 stages.

preprocessing   text normalisation + byte tokens, limits, voice, reference recording (16 kHz)
speaker_encode  speaker encoder -> ``speaker_embedding`` tensor in the payload
tts_engine      AR transformer (KV cache) emitting 9 codebooks per step in the delay pattern;
                aligned ~86 Hz frames are streamed to the vocoder as they complete
vocoder         DAC-style codec decoder: 9 codebooks -> 44.1 kHz mono, streamed to the client
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

MODEL = "zonos2"
CODEC = CodecConfig(sample_rate=44100, hop=512, channels=1, latent_dim=64, num_codebooks=9, codebook_size=1024)
SPEAKER = SpeakerEncoderConfig(embed_dim=64)
AR = ARConfig(num_codebooks=9, codebook_size=1024, layout="delay", cond_dim=SPEAKER.embed_dim, max_seq_len=3072)
MAX_CHARS = 400
MAX_SECONDS = 30.0


def components() -> dict[str, Component]:
    return {
        "speaker_encoder": (build_speaker_encoder, SPEAKER),
        "backbone": (build_ar, AR),
        "dac.quantizer": (build_rvq, CODEC),
        "dac.decoder": (build_codec_decoder, CODEC),
    }


class TTSEngine:
    def __init__(self, engine: AREngine):
        self.engine = engine

    def process(self, payload: Any, ctx: Any) -> Any:
        request = TextRequest.from_data(payload.data)
        embedding = require(payload.data, "speaker_embedding", MODEL, "tts_engine")
        total = self.engine.stream(ctx, request, embedding)
        return with_data(payload, {"num_frames": total, "frame_rate": CODEC.frame_rate})


def build_preprocessing() -> ReferencePreprocessing:
    return ReferencePreprocessing(CODEC.frame_rate, SPEAKER.sample_rate, MAX_CHARS, MAX_SECONDS)


def build_speaker_encode(load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1) -> SpeakerEncoderStage:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    return SpeakerEncoderStage(loader.get(components(), "speaker_encoder"), loader.device, MODEL, "speaker_encode")


def build_tts_engine(
    load_format: str = "dummy",
    model_path: str | None = None,
    seed: int = DEFAULT_SEED,
    device: str | None = None,
    num_threads: int | None = 1,
    chunk_frames: int = 43,
    first_chunk_frames: int = 12,
    temperature: float = 0.8,
    top_k: int = 50,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_batch_tokens: int | None = None,
) -> TTSEngine:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    return TTSEngine(
        AREngine(
            model_name=MODEL, model=loader.get(components(), "backbone"), seed=seed, params=SamplingParams(temperature, top_k),
            chunk_frames=chunk_frames, first_chunk_frames=first_chunk_frames, batching=BatchLimits(max_batch_size, max_batch_tokens), stage="tts_engine",
        )
    )


def build_vocoder(load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1, max_batch_size: int | None = None) -> CodecVocoder:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    quantizer = loader.get(components(), "dac.quantizer")
    return CodecVocoder(
        max_batch_size=max_batch_size,
        model=MODEL, stage="vocoder", frontend=lambda first_chunk: quantizer.decode,
        decoder=loader.get(components(), "dac.decoder"),
        audio=AudioFormat(CODEC.sample_rate, CODEC.channels), device=loader.device,
    )
