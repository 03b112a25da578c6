"""Config class of ``fishaudio/s2-pro``: its pipeline file, whose ``process_local_edges`` is the contract."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class FishAudioS2ProConfig(ModelConfig):
    model_id = "fishaudio/s2-pro"
    package = "omni_models.fishaudio_s2_pro"
