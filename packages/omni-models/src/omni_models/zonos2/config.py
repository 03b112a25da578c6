"""Config class of ``zyphra/zonos2``: its pipeline file, whose ``process_local_edges`` is the contract."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class Zonos2Config(ModelConfig):
    model_id = "zyphra/zonos2"
    package = "omni_models.zonos2"
