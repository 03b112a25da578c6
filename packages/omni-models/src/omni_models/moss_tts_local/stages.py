"""MOSS-TTS Local stages: the shared queued stages (``common.queued``) bound to this model's row in
``common.catalog`` and to its own process-local ``PREPARED_QUEUE`` (``handoff``). The vocoder is
the shared one (``common.factories:build_vocoder``); the split variant runs it on
``codec_device`` (cuda:1) unless the runtime runs on the CPU.

preprocessing  text normalisation + byte tokens, limits, and the reference recording encoded by
               the codec encoder into prompt codes; published into the process-local queue
tts_engine     backbone transformer (KV cache) predicting codebook 0 per 12.5 Hz frame and a
               local transformer predicting codebooks 1..15; streamed to the vocoder
"""

from __future__ import annotations

from typing import Any

from omni_models.common.audio import VOICES as VOICES  # the preset voices omni serve lists (GET /v1/audio/voices)
from omni_models.common.catalog import spec_for
from omni_models.common.queued import QueuedPreprocessing, QueuedTTSEngine, build_queued_engine, build_queued_preprocessing

from .handoff import MODEL, PREPARED_QUEUE

SPEC = spec_for(MODEL)


def build_preprocessing(device: str | None = None, model_path: str | None = None, stage_name: str = "preprocessing", **knobs: Any) -> QueuedPreprocessing:
    return build_queued_preprocessing(SPEC, PREPARED_QUEUE, device, model_path, stage_name, knobs)


def build_tts_engine(device: str | None = None, model_path: str | None = None, stage_name: str = "tts_engine", **knobs: Any) -> QueuedTTSEngine:
    return build_queued_engine(SPEC, PREPARED_QUEUE, device, model_path, stage_name, knobs)
