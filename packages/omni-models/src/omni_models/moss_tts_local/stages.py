"""MOSS-TTS Local stages.

preprocessing  text normalisation + byte tokens, limits, and the reference recording encoded by
               the codec encoder into prompt codes; published into the process-local queue
tts_engine     backbone transformer (KV cache) predicting codebook 0 per 12.5 Hz frame and a
               local transformer predicting codebooks 1..15; streamed to the vocoder
vocoder        codec decoder: 16 codebooks -> 48 kHz stereo, streamed to the client. In the split
               placement it runs on ``codec_device`` (cuda:1) unless the runtime runs on the CPU.
"""

from __future__ import annotations

import torch

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

CODEC = CodecConfig(sample_rate=48000, hop=3840, channels=2, latent_dim=64, num_codebooks=16, codebook_size=1024)
AR = ARConfig(num_codebooks=16, codebook_size=1024, layout="depth", max_seq_len=2048)
MAX_CHARS = 400
MAX_SECONDS = 30.0


def components() -> dict[str, Component]:
    return {
        "codec.encoder": (build_codec_encoder, CODEC),
        "codec.quantizer": (build_rvq, CODEC),
        "codec.decoder": (build_codec_decoder, CODEC),
        "backbone": (build_ar, AR),
    }


def codec_placement(device: str | None, codec_device: str | None) -> str:
    """Where the codec runs: the runtime's device, except that a split placement moves it to
    ``codec_device`` on CUDA. ``--device cpu`` keeps everything on the CPU."""
    if codec_device is None or device is None or device == "cpu":
        return device or "cpu"
    target = torch.device(codec_device)
    if target.type == "cuda":
        count = torch.cuda.device_count()
        index = target.index or 0
        if index >= count:
            raise ValueError(
                f"{MODEL}: codec_device {codec_device!r} does not exist ({count} CUDA device(s) visible); "
                "give the machine a second GPU, set factory_args.codec_device to an existing device, or run with --device cpu"
            )
    return str(target)


def build_preprocessing(load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1) -> QueuedPreprocessing:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    return QueuedPreprocessing(loader, components(), CODEC, PREPARED_QUEUE, max_chars=MAX_CHARS, max_seconds=MAX_SECONDS)


def build_tts_engine(
    load_format: str = "dummy",
    model_path: str | None = None,
    seed: int = DEFAULT_SEED,
    device: str | None = None,
    num_threads: int | None = 1,
    chunk_frames: int = 5,
    first_chunk_frames: int = 2,
    temperature: float = 0.8,
    top_k: int = 50,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_batch_tokens: int | None = None,
) -> QueuedTTSEngine:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    return QueuedTTSEngine(
        AREngine(
            model_name=MODEL, model=loader.get(components(), "backbone"), seed=seed, params=SamplingParams(temperature, top_k),
            chunk_frames=chunk_frames, first_chunk_frames=first_chunk_frames, batching=BatchLimits(max_batch_size, max_batch_tokens), stage="tts_engine",
        ),
        CODEC.frame_rate,
        PREPARED_QUEUE,
    )


def build_vocoder(
    load_format: str = "dummy",
    model_path: str | None = None,
    seed: int = DEFAULT_SEED,
    device: str | None = None,
    num_threads: int | None = 1,
    codec_device: str | None = None,
    max_batch_size: int | None = None,
) -> CodecVocoder:
    loader = Loader.create(load_format, model_path, seed, codec_placement(device, codec_device), num_threads)
    quantizer = loader.get(components(), "codec.quantizer")
    return CodecVocoder(
        max_batch_size=max_batch_size,
        model=MODEL, stage="vocoder", frontend=lambda first_chunk: quantizer.decode,
        decoder=loader.get(components(), "codec.decoder"),
        audio=AudioFormat(CODEC.sample_rate, CODEC.channels), device=loader.device,
    )
