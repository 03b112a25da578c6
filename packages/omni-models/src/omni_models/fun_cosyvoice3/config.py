"""Fun-CosyVoice3 contract: preprocessing -> tts_engine is process-local."""

from __future__ import annotations

from omni_models.common.config import ModelConfig


class FunCosyVoice3Config(ModelConfig):
    model_id = "funaudiollm/fun-cosyvoice3"
    package = "omni_models.fun_cosyvoice3"
    PROCESS_LOCAL_EDGES = (
        (
            "preprocessing",
            "tts_engine",
            "prepared requests live in _PREPROCESSING_CONTEXT / _PREPARED_REQUESTS, read in-process by the AR engine builder",
        ),
    )
