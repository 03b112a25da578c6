"""Config class of ``inclusionai/ming-omni-tts``: its pipeline file, whose ``process_local_edges`` is the contract."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class MingOmniTTSConfig(ModelConfig):
    model_id = "inclusionai/ming-omni-tts"
    package = "omni_models.ming_omni_tts"
