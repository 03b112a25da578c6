"""Voxtral TTS contract: preprocessing -> tts_generation stays in one process as a compatibility guard."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class VoxtralTTSConfig(ModelConfig):
    model_id = "mistralai/voxtral-tts"
    package = "omni_models.voxtral_tts"
    PROCESS_LOCAL_EDGES = (
        ("preprocessing", "tts_generation", "compatibility guard preserving the previous process-split allowlist"),
    )
