"""Voxtral TTS stages.

preprocessing   text normalisation + byte tokens; the payload carries ``input_ids``, ``voice``
                and the generation limits (everything tts_generation needs, no module state)
tts_generation  AR transformer (KV cache) generating 8 parallel codebooks per 12.5 Hz frame,
                returned as ``codes`` in the payload
vocoder         codec decoder: 8 codebooks -> 24 kHz mono, decoded and streamed in chunks
"""

from __future__ import annotations

from typing import Any

from omni_models.common.ar import ARConfig
from omni_models.common.audio import VOICES as VOICES  # the preset voices omni serve lists (GET /v1/audio/voices)
from omni_models.common.audio import voice_index
from omni_models.common.codec import CodecConfig
from omni_models.common.components import Component, Loader, build_ar, build_codec_decoder, build_rvq
from omni_models.common.limits import GenerationLimits
from omni_models.common.request import TextRequest, prepare_text_request
from omni_models.common.sampling import SamplingParams
from omni_models.common.scheduler import DEFAULT_MAX_BATCH_SIZE, BatchLimits
from omni_models.common.stages import AREngine, AudioFormat, CodecVocoder, require, with_data
from omni_models.common.weights import DEFAULT_SEED
from omni_runtime.errors import InvalidRequest

MODEL = "voxtral_tts"
CODEC = CodecConfig(sample_rate=24000, hop=1920, channels=1, latent_dim=64, num_codebooks=8, codebook_size=1024)
AR = ARConfig(num_codebooks=8, codebook_size=1024, layout="parallel", max_seq_len=2048)
MAX_CHARS = 400
MAX_SECONDS = 30.0


def components() -> dict[str, Component]:
    return {
        "backbone": (build_ar, AR),
        "codec.quantizer": (build_rvq, CODEC),
        "codec.decoder": (build_codec_decoder, CODEC),
    }


class Preprocessing:
    def process(self, payload: Any, ctx: Any = None) -> Any:
        if payload.data.get("ref_audio") is not None:
            raise InvalidRequest(f"{MODEL} does not clone voices from ref_audio; choose a preset voice ({', '.join(VOICES)})", param="ref_audio")
        request = prepare_text_request(payload.data, frame_rate=CODEC.frame_rate, max_chars=MAX_CHARS, max_seconds=MAX_SECONDS)
        return with_data(
            payload,
            {
                "text": request.text,
                "input_ids": list(request.input_ids),
                "voice": payload.data.get("voice") or "default",
                "generation_limits": request.limits.to_dict(),
                "speed": request.speed,
                "seed": request.seed,
                "temperature": request.temperature,
                "top_k": request.top_k,
            },
        )


class TTSGeneration:
    def __init__(self, engine: AREngine):
        self.engine = engine

    def process(self, payload: Any, ctx: Any) -> Any:
        data = payload.data
        voice = require(data, "voice", MODEL, "tts_generation")
        request = TextRequest(
            text=require(data, "text", MODEL, "tts_generation"),
            input_ids=[int(i) for i in require(data, "input_ids", MODEL, "tts_generation")],
            limits=GenerationLimits.from_dict(require(data, "generation_limits", MODEL, "tts_generation")),
            voice_index=voice_index(voice),
            speed=float(require(data, "speed", MODEL, "tts_generation")),
            seed=int(require(data, "seed", MODEL, "tts_generation")),
            temperature=data.get("temperature"),
            top_k=data.get("top_k"),
        )
        codes = self.engine.collect(ctx, request, self.engine.model.voice(request.voice_index))
        return with_data(payload, {"codes": codes, "voice": voice, "frame_rate": CODEC.frame_rate})


def build_preprocessing() -> Preprocessing:
    return Preprocessing()


def build_tts_generation(
    load_format: str = "dummy",
    model_path: str | None = None,
    seed: int = DEFAULT_SEED,
    device: str | None = None,
    num_threads: int | None = 1,
    temperature: float = 0.8,
    top_k: int = 50,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_batch_tokens: int | None = None,
) -> TTSGeneration:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    return TTSGeneration(
        AREngine(
            model_name=MODEL, model=loader.get(components(), "backbone"), seed=seed, params=SamplingParams(temperature, top_k),
            chunk_frames=1, first_chunk_frames=1, batching=BatchLimits(max_batch_size, max_batch_tokens), stage="tts_generation",
        )
    )


def build_vocoder(
    load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1, chunk_frames: int = 6
, max_batch_size: int | None = None) -> CodecVocoder:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    quantizer = loader.get(components(), "codec.quantizer")
    return CodecVocoder(
        max_batch_size=max_batch_size,
        model=MODEL, stage="vocoder", frontend=lambda first_chunk: quantizer.decode,
        decoder=loader.get(components(), "codec.decoder"),
        audio=AudioFormat(CODEC.sample_rate, CODEC.channels), device=loader.device, chunk_frames=chunk_frames,
    )
