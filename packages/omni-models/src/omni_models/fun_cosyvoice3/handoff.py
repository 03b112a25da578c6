"""Fun-CosyVoice3's module memory, the reason ``preprocessing -> tts_engine`` is process-local.

``_PREPARED_REQUESTS`` holds each request's text, CAM++ speaker embedding and reference speech
tokens from preprocessing until the speech-token LM pops it; ``_PREPROCESSING_CONTEXT`` tells the
LM's builder that preprocessing was built here (``omni_models.common.prepared`` has the logic).
"""

from __future__ import annotations

from typing import Any

MODEL = "fun_cosyvoice3"
EDGE = "preprocessing -> tts_engine"
_PREPROCESSING_CONTEXT: dict[str, Any] = {}
_PREPARED_REQUESTS: dict[str, tuple[float, Any]] = {}
