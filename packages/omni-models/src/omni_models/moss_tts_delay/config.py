"""Config class of ``openmoss/moss-tts-delay``: its pipeline file, whose ``process_local_edges`` is the contract."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class MossTTSDelayConfig(ModelConfig):
    model_id = "openmoss/moss-tts-delay"
    package = "omni_models.moss_tts_delay"
