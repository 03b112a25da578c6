"""MOSS-TTS Local contracts: single-GPU (queue edge) and split (every pipeline edge)."""

from __future__ import annotations

from omni_models.common.config import ModelConfig

QUEUE_REASON = "preprocessing publishes into a process-local PreparedRequestQueue the AR stage pops"
SPLIT_CODEC_REASON = (
    "split placement declares GPU 0 while the codec runs on cuda:1 inside the pipeline process; "
    "every pipeline edge stays in that process"
)


class MossTTSLocalConfig(ModelConfig):
    model_id = "openmoss/moss-tts-local"
    package = "omni_models.moss_tts_local"
    PROCESS_LOCAL_EDGES = (("preprocessing", "tts_engine", QUEUE_REASON),)


class MossTTSLocalSplitConfig(ModelConfig):
    model_id = "openmoss/moss-tts-local-split"
    package = "omni_models.moss_tts_local"
    variant = "pipeline_split"
    PROCESS_LOCAL_EDGES = (
        ("preprocessing", "tts_engine", QUEUE_REASON),
        ("tts_engine", "vocoder", SPLIT_CODEC_REASON),
    )
