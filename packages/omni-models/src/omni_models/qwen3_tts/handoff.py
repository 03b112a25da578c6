"""Qwen3-TTS's process-local state: what its ``preprocessing -> tts_engine`` contract is about.

Preprocessing registers its front end (speaker dim, tokenizer vocabulary) in
``_PREPROCESSING_CONTEXT`` and leaves each prepared request (text and speaker embedding) in
``_PREPARED_REQUESTS``; the talker's builder and stage read them in the same process. The logic
lives once in ``omni_models.common.prepared``.
"""

from __future__ import annotations

from typing import Any

MODEL = "qwen3_tts"
EDGE = "preprocessing -> tts_engine"
_PREPROCESSING_CONTEXT: dict[str, Any] = {}
_PREPARED_REQUESTS: dict[str, tuple[float, Any]] = {}
