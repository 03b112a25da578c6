"""Config class of ``qwen/qwen3-tts``: its pipeline file, whose ``process_local_edges`` is the contract."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class Qwen3TTSConfig(ModelConfig):
    model_id = "qwen/qwen3-tts"
    package = "omni_models.qwen3_tts"
