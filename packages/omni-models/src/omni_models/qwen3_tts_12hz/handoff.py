"""The process-local handoff from preprocessing to the talker engine.

``build_preprocessing`` registers the loaded checkpoint in ``_PREPROCESSING_CONTEXT``; the engine
builder reads it there (and refuses to build without it, or for another checkpoint), and per
request preprocessing stores the prepared request in ``_PREPARED_REQUESTS`` for the engine to
pop. Both dicts are plain process memory, which is why ``preprocessing -> tts_engine`` is
declared process-local in ``pipeline.yaml`` (the spec's Qwen3-TTS contract).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from omni_models.common import prepared

from .prompt import PromptInputs
from .request import RequestFields

MODEL = "qwen3_tts_12hz"
EDGE = "preprocessing -> tts_engine"
PREPARED_TTL_S = 600.0

_PREPROCESSING_CONTEXT: dict[str, Any] = {}
_PREPARED_REQUESTS: dict[str, tuple[float, PreparedRequest]] = {}


@dataclass(frozen=True)
class PreprocessingContext:
    """What the engine builder checks: the same checkpoint directory as preprocessing."""

    directory: Path


@dataclass(frozen=True)
class PreparedRequest:
    fields: RequestFields
    inputs: PromptInputs
    context_codes: torch.Tensor | None  # Base ICL: reference frames [T, G], the vocoder's left context


def register_context(context: PreprocessingContext) -> None:
    _PREPROCESSING_CONTEXT[MODEL] = context


def preprocessing_context() -> PreprocessingContext:
    return prepared.context_of(_PREPROCESSING_CONTEXT, MODEL, EDGE)


def put_prepared(request_id: str, request: PreparedRequest) -> None:
    prepared.put(_PREPARED_REQUESTS, request_id, request, model=MODEL, ttl_s=PREPARED_TTL_S)


def take_prepared(request_id: str) -> PreparedRequest:
    return prepared.take(_PREPARED_REQUESTS, request_id, model=MODEL, edge=EDGE)
