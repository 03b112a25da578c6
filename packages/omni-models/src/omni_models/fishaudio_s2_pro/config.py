"""FishAudio S2-Pro contract: no process-local edge."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class FishAudioS2ProConfig(ModelConfig):
    model_id = "fishaudio/s2-pro"
    package = "omni_models.fishaudio_s2_pro"
    PROCESS_LOCAL_EDGES = ()
