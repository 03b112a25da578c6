"""The espeak reference pipeline's config class: its pipeline file and its process-local contract."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from omni_config import PipelineConfig, ProcessLocalEdge, load_config

MODEL_ID = "omni/espeak"
PIPELINE_FILE = Path(__file__).with_name("pipeline.yaml")


class EspeakConfig:
    """Every espeak handoff is carried in ``StagePayload.data``: any split is allowed."""

    model_id = MODEL_ID
    pipeline_file = PIPELINE_FILE

    @staticmethod
    def process_local_edges() -> list[ProcessLocalEdge]:
        return []

    @classmethod
    def load(cls, overrides: Sequence[str] = ()) -> PipelineConfig:
        return load_config(cls.pipeline_file, overrides)
