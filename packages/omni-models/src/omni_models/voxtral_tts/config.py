"""Config class of ``mistralai/voxtral-tts``: its pipeline file, whose ``process_local_edges`` is the contract."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class VoxtralTTSConfig(ModelConfig):
    model_id = "mistralai/voxtral-tts"
    package = "omni_models.voxtral_tts"
