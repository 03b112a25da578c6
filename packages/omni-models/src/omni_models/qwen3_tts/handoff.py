"""Qwen3-TTS's process-local handoff from preprocessing to the AR engine: the module state.

The logic lives once in ``omni_models.common.prepared``; what stays here is the state the
pipeline's contract is about. Both dicts are plain process memory, which is why
``preprocessing -> tts_engine`` is declared process-local.
"""

from __future__ import annotations

from typing import Any

MODEL = "qwen3_tts"
EDGE = "preprocessing -> tts_engine"

_PREPROCESSING_CONTEXT: dict[str, Any] = {}
_PREPARED_REQUESTS: dict[str, tuple[float, Any]] = {}
