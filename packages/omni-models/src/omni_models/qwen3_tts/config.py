"""Qwen3-TTS contract: preprocessing -> tts_engine is process-local."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class Qwen3TTSConfig(ModelConfig):
    model_id = "qwen/qwen3-tts"
    package = "omni_models.qwen3_tts"
    PROCESS_LOCAL_EDGES = (
        (
            "preprocessing",
            "tts_engine",
            "prepared requests live in _PREPROCESSING_CONTEXT / _PREPARED_REQUESTS, read in-process by the AR engine builder",
        ),
    )
