"""Config class of ``omni/espeak``: its pipeline file, whose ``process_local_edges`` is the contract."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class EspeakConfig(ModelConfig):
    """Every espeak handoff is carried in ``StagePayload.data``: any split is allowed."""

    model_id = "omni/espeak"
    package = "omni_models.espeak"
