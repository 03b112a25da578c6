"""Audar-TTS contract: no process-local edge (stage state travels in StagePayload.data)."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class AudarTTSConfig(ModelConfig):
    model_id = "audar/audar-tts"
    package = "omni_models.audar_tts"
    PROCESS_LOCAL_EDGES = ()
