"""Qwen3-TTS's own stages: a preprocessing that runs the speaker encoder and leaves the prepared
request in module memory, and the engine that takes it there (``handoff``: the state its
``preprocessing -> tts_engine`` contract is about). The numbers are its row in ``common.catalog``;
the vocoder is the shared one (``common.factories:build_vocoder``).

preprocessing  text normalisation + byte tokens, limits, and the speaker embedding (ECAPA-style
               encoder of ``ref_audio``, or a preset voice); the prepared request stays in
               ``_PREPARED_REQUESTS`` (process-local)
tts_engine     talker transformer (KV cache) predicting codebook 0 at 12.5 Hz and the code
               predictor (depth transformer) predicting codebooks 1..15; streamed to the vocoder
"""

from __future__ import annotations

from typing import Any

import torch

from omni_models.common import prepared
from omni_models.common.audio import VOICES as VOICES  # the preset voices omni serve lists (GET /v1/audio/voices)
from omni_models.common.audio import reference_audio
from omni_models.common.catalog import spec_for
from omni_models.common.components import Loader
from omni_models.common.factories import ar_engine
from omni_models.common.prepared import PreparedRequest, PreprocessingContext
from omni_models.common.request import TOKENIZER, prepare_text_request
from omni_models.common.spec import knobs_for
from omni_models.common.stages import AREngine, with_data
from omni_models.common.voice_cache import reference_speaker

from .handoff import _PREPARED_REQUESTS, _PREPROCESSING_CONTEXT, EDGE, MODEL  # the contract's module state

SPEC = spec_for(MODEL)


class Preprocessing:
    def __init__(self, loader: Loader):
        self.device = loader.device
        self.speaker_encoder = SPEC.load(loader, "speaker_encoder")

    @torch.inference_mode()
    def process(self, payload: Any, ctx: Any = None) -> Any:
        data = payload.data
        text = prepare_text_request(data, frame_rate=SPEC.frame_rate, max_chars=SPEC.text.max_chars, max_seconds=SPEC.text.max_seconds)
        ref = reference_audio(data, SPEC.reference_sample_rate)
        speaker = reference_speaker(data, ref, lambda r: self.speaker_encoder(r.to(self.device)), lambda: self.speaker_encoder.preset(text.voice_index), self.device)
        prepared.put(_PREPARED_REQUESTS, payload.request_id, PreparedRequest(text, speaker), model=MODEL)
        return with_data(payload, {"text": text.text, "num_input_ids": len(text.input_ids)})


class TTSEngine:
    def __init__(self, engine: AREngine):
        self.engine = engine

    def process(self, payload: Any, ctx: Any) -> Any:
        request = prepared.take(_PREPARED_REQUESTS, payload.request_id, model=MODEL, edge=EDGE)
        total = self.engine.stream(ctx, request.text, request.speaker)
        return with_data(payload, {"num_frames": total, "frame_rate": SPEC.frame_rate})


def build_preprocessing(device: str | None = None, model_path: str | None = None, stage_name: str = "preprocessing", **knobs: Any) -> Preprocessing:
    stage = Preprocessing(knobs_for(SPEC, "loader", knobs, stage_name).loader(device, model_path))
    prepared.register(_PREPROCESSING_CONTEXT, MODEL, PreprocessingContext(speaker_dim=SPEC.speaker.embed_dim, tokenizer_vocab=TOKENIZER.vocab_size))
    return stage


def build_tts_engine(device: str | None = None, model_path: str | None = None, stage_name: str = "tts_engine", **knobs: Any) -> TTSEngine:
    prepared.context_of(_PREPROCESSING_CONTEXT, MODEL, EDGE).check(SPEC.ar.cond_dim, SPEC.ar.text_vocab, MODEL)
    settings = knobs_for(SPEC, "engine", knobs, stage_name)
    return TTSEngine(ar_engine(SPEC, settings, settings.loader(device, model_path), stage_name))
