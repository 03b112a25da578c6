"""Config class of ``audar/audar-tts``: its pipeline file, whose ``process_local_edges`` is the contract."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class AudarTTSConfig(ModelConfig):
    model_id = "audar/audar-tts"
    package = "omni_models.audar_tts"
