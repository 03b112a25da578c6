"""Higgs-TTS contract: no process-local edge (every handoff is in the payload)."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class HiggsTTSConfig(ModelConfig):
    model_id = "bosonai/higgs-tts-3-4b"
    package = "omni_models.higgs_tts"
    PROCESS_LOCAL_EDGES = ()
