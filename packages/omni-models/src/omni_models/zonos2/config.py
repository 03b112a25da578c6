"""Zonos2 contract: no process-local edge (stage state travels in StagePayload.data)."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class Zonos2Config(ModelConfig):
    model_id = "zyphra/zonos2"
    package = "omni_models.zonos2"
    PROCESS_LOCAL_EDGES = ()
