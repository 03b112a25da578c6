"""MOSS-TTS Delay stages.

preprocessing  text normalisation + byte tokens, limits, reference recording -> prompt codes
               (codec encoder); published into the process-local queue
tts_engine     one transformer (KV cache) emitting 8 codebooks per step in the delay pattern;
               aligned frames are streamed to the vocoder as soon as they complete
vocoder        codec decoder: 8 codebooks at 25 Hz -> 24 kHz mono, streamed to the client
"""

from __future__ import annotations

from omni_models.common.ar import ARConfig
from omni_models.common.audio import VOICES as VOICES  # the preset voices omni serve lists (GET /v1/audio/voices)
from omni_models.common.codec import CodecConfig
from omni_models.common.components import Component, Loader, build_ar, build_codec_decoder, build_codec_encoder, build_rvq
from omni_models.common.queued import QueuedPreprocessing, QueuedTTSEngine
from omni_models.common.sampling import SamplingParams
from omni_models.common.scheduler import DEFAULT_MAX_BATCH_SIZE, BatchLimits
from omni_models.common.stages import AREngine, AudioFormat, CodecVocoder
from omni_models.common.weights import DEFAULT_SEED

from .handoff import MODEL, PREPARED_QUEUE

CODEC = CodecConfig(sample_rate=24000, hop=960, channels=1, latent_dim=64, num_codebooks=8, codebook_size=1024)
AR = ARConfig(num_codebooks=8, codebook_size=1024, layout="delay", max_seq_len=2048)
MAX_CHARS = 400
MAX_SECONDS = 30.0


def components() -> dict[str, Component]:
    return {
        "codec.encoder": (build_codec_encoder, CODEC),
        "codec.quantizer": (build_rvq, CODEC),
        "codec.decoder": (build_codec_decoder, CODEC),
        "model": (build_ar, AR),
    }


def build_preprocessing(load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1) -> QueuedPreprocessing:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    return QueuedPreprocessing(loader, components(), CODEC, PREPARED_QUEUE, max_chars=MAX_CHARS, max_seconds=MAX_SECONDS)


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
) -> QueuedTTSEngine:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    return QueuedTTSEngine(
        AREngine(
            model_name=MODEL, model=loader.get(components(), "model"), seed=seed, params=SamplingParams(temperature, top_k),
            chunk_frames=chunk_frames, first_chunk_frames=first_chunk_frames, batching=BatchLimits(max_batch_size, max_batch_tokens), stage="tts_engine",
        ),
        CODEC.frame_rate,
        PREPARED_QUEUE,
    )


def build_vocoder(load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1, max_batch_size: int | None = None) -> CodecVocoder:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    quantizer = loader.get(components(), "codec.quantizer")
    return CodecVocoder(
        max_batch_size=max_batch_size,
        model=MODEL, stage="vocoder", frontend=lambda first_chunk: quantizer.decode,
        decoder=loader.get(components(), "codec.decoder"),
        audio=AudioFormat(CODEC.sample_rate, CODEC.channels), device=loader.device,
    )
