"""Ming-Omni-TTS contract: two compatibility-guard edges stay in one process."""

from __future__ import annotations

from omni_models.common.config import ModelConfig

GUARD = "compatibility guard preserving the previous process-split allowlist"


class MingOmniTTSConfig(ModelConfig):
    model_id = "inclusionai/ming-omni-tts"
    package = "omni_models.ming_omni_tts"
    PROCESS_LOCAL_EDGES = (
        ("preprocessing", "reference_encode", GUARD),
        ("reference_encode", "tts_engine", GUARD),
    )
