"""Qwen3-TTS stages.

preprocessing  text normalisation + byte tokens, limits, and the speaker embedding (ECAPA-style
               encoder of ``ref_audio``, or a preset voice); the prepared request stays in
               ``_PREPARED_REQUESTS`` (process-local)
tts_engine     talker transformer (KV cache) predicting codebook 0 at 12.5 Hz and the code
               predictor (depth transformer) predicting codebooks 1..15; streamed to the vocoder
vocoder        the 12.5 Hz speech tokenizer's decoder: 16 codebooks -> 24 kHz mono, streamed
"""

from __future__ import annotations

from typing import Any

import torch

from omni_models.common.ar import ARConfig
from omni_models.common.audio import VOICES as VOICES  # the preset voices omni serve lists (GET /v1/audio/voices)
from omni_models.common.audio import reference_audio
from omni_models.common.codec import CodecConfig
from omni_models.common.components import Component, Loader, build_ar, build_codec_decoder, build_rvq, build_speaker_encoder
from omni_models.common.playback import Schedule
from omni_models.common.request import TOKENIZER, prepare_text_request
from omni_models.common.sampling import SamplingParams
from omni_models.common.scheduler import DEFAULT_MAX_BATCH_SIZE, BatchLimits
from omni_models.common.speaker import SpeakerEncoderConfig
from omni_models.common.stages import AREngine, AudioFormat, CodecVocoder, with_data
from omni_models.common.weights import DEFAULT_SEED

from .handoff import MODEL, PreparedRequest, PreprocessingContext, preprocessing_context, put_prepared, register_context, take_prepared

CODEC = CodecConfig(sample_rate=24000, hop=1920, channels=1, latent_dim=64, num_codebooks=16, codebook_size=2048)
SPEAKER = SpeakerEncoderConfig(embed_dim=64)
AR = ARConfig(num_codebooks=16, codebook_size=2048, layout="depth", cond_dim=SPEAKER.embed_dim, max_seq_len=2048)
MAX_CHARS = 400
MAX_SECONDS = 30.0


def components() -> dict[str, Component]:
    return {
        "speaker_encoder": (build_speaker_encoder, SPEAKER),
        "talker": (build_ar, AR),
        "speech_tokenizer.quantizer": (build_rvq, CODEC),
        "speech_tokenizer.decoder": (build_codec_decoder, CODEC),
    }


class Preprocessing:
    def __init__(self, loader: Loader):
        self.device = loader.device
        self.speaker_encoder = loader.get(components(), "speaker_encoder")

    @torch.inference_mode()
    def process(self, payload: Any, ctx: Any = None) -> Any:
        data = payload.data
        text = prepare_text_request(data, frame_rate=CODEC.frame_rate, max_chars=MAX_CHARS, max_seconds=MAX_SECONDS)
        ref = reference_audio(data, SPEAKER.sample_rate)
        speaker = self.speaker_encoder.preset(text.voice_index) if ref is None else self.speaker_encoder(ref.to(self.device))
        put_prepared(payload.request_id, PreparedRequest(text, speaker))
        return with_data(payload, {"text": text.text, "num_input_ids": len(text.input_ids)})


class TTSEngine:
    def __init__(self, engine: AREngine):
        self.engine = engine

    def process(self, payload: Any, ctx: Any) -> Any:
        prepared = take_prepared(payload.request_id)
        total = self.engine.stream(ctx, prepared.text, prepared.speaker)
        return with_data(payload, {"num_frames": total, "frame_rate": CODEC.frame_rate})


def build_preprocessing(load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1) -> Preprocessing:
    stage = Preprocessing(Loader.create(load_format, model_path, seed, device, num_threads))
    register_context(PreprocessingContext(speaker_dim=SPEAKER.embed_dim, tokenizer_vocab=TOKENIZER.vocab_size))
    return stage


def build_tts_engine(
    load_format: str = "dummy",
    model_path: str | None = None,
    seed: int = DEFAULT_SEED,
    device: str | None = None,
    num_threads: int | None = 1,
    chunk_frames: int = 6,
    first_chunk_frames: int = 2,
    temperature: float = 0.8,
    top_k: int = 50,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_batch_tokens: int | None = None,
    scheduler: str = "deadline",
    busy_first_chunk_frames: int = 1,
) -> TTSEngine:
    context = preprocessing_context()
    if context.speaker_dim != AR.cond_dim or context.tokenizer_vocab != AR.text_vocab:
        raise ValueError(
            f"{MODEL}: preprocessing produces speaker dim {context.speaker_dim} / vocab {context.tokenizer_vocab}, "
            f"the talker expects {AR.cond_dim} / {AR.text_vocab}"
        )
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    return TTSEngine(
        AREngine(
            model_name=MODEL, model=loader.get(components(), "talker"), seed=seed, params=SamplingParams(temperature, top_k),
            chunk_frames=chunk_frames, first_chunk_frames=first_chunk_frames, batching=BatchLimits(max_batch_size, max_batch_tokens), stage="tts_engine",
            schedule=Schedule(scheduler, busy_first_chunk_frames, frame_rate=CODEC.frame_rate),
        )
    )


def build_vocoder(load_format: str = "dummy", model_path: str | None = None, seed: int = DEFAULT_SEED, device: str | None = None, num_threads: int | None = 1, max_batch_size: int | None = None, scheduler: str = "deadline") -> CodecVocoder:
    loader = Loader.create(load_format, model_path, seed, device, num_threads)
    quantizer = loader.get(components(), "speech_tokenizer.quantizer")
    return CodecVocoder(
        max_batch_size=max_batch_size, scheduler=scheduler,
        model=MODEL, stage="vocoder", frontend=lambda first_chunk: quantizer.decode,
        decoder=loader.get(components(), "speech_tokenizer.decoder"),
        audio=AudioFormat(CODEC.sample_rate, CODEC.channels), device=loader.device,
    )
