"""Config classes of ``openmoss/moss-tts-local`` and its split variant: their pipeline files, whose ``process_local_edges`` are the contracts."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class MossTTSLocalConfig(ModelConfig):
    model_id = "openmoss/moss-tts-local"
    package = "omni_models.moss_tts_local"


class MossTTSLocalSplitConfig(ModelConfig):
    model_id = "openmoss/moss-tts-local-split"
    package = "omni_models.moss_tts_local"
    variant = "pipeline_split"
