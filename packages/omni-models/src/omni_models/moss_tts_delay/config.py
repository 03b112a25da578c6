"""MOSS-TTS Delay contract: preprocessing -> tts_engine is process-local (queue handoff)."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class MossTTSDelayConfig(ModelConfig):
    model_id = "openmoss/moss-tts-delay"
    package = "omni_models.moss_tts_delay"
    PROCESS_LOCAL_EDGES = (
        ("preprocessing", "tts_engine", "preprocessing publishes into a process-local PreparedRequestQueue the AR stage pops"),
    )
