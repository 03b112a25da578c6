"""Config class of ``bosonai/higgs-tts-3-4b``: its pipeline file, whose ``process_local_edges`` is the contract."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class HiggsTTSConfig(ModelConfig):
    model_id = "bosonai/higgs-tts-3-4b"
    package = "omni_models.higgs_tts"
