"""Qwen3-TTS's process-local handoff from preprocessing to the AR engine.

``build_preprocessing`` registers the front end in ``_PREPROCESSING_CONTEXT``; the AR engine
builder reads it there (and refuses to build without it), and per request preprocessing stores
the prepared request in ``_PREPARED_REQUESTS`` for the engine to pop. Both dicts are plain
process memory, which is why ``preprocessing -> tts_engine`` is declared process-local.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from omni_models.common import prepared
from omni_models.common.request import TextRequest

MODEL = "qwen3_tts"
EDGE = "preprocessing -> tts_engine"

_PREPROCESSING_CONTEXT: dict[str, Any] = {}
_PREPARED_REQUESTS: dict[str, tuple[float, PreparedRequest]] = {}

#: The stage contract has no per-stage abort hook: a request cancelled between preprocessing and
#: the engine would leave its entry behind, so entries older than this are dropped on each put.
PREPARED_TTL_S = 600.0


@dataclass(frozen=True)
class PreprocessingContext:
    """What the engine builder takes from the front end: the speaker embedding size it must match."""

    speaker_dim: int
    tokenizer_vocab: int


@dataclass(frozen=True)
class PreparedRequest:
    text: TextRequest
    speaker: torch.Tensor


def register_context(context: PreprocessingContext) -> None:
    _PREPROCESSING_CONTEXT[MODEL] = context


def preprocessing_context() -> PreprocessingContext:
    return prepared.context_of(_PREPROCESSING_CONTEXT, MODEL, EDGE)


def put_prepared(request_id: str, request: PreparedRequest) -> None:
    prepared.put(_PREPARED_REQUESTS, request_id, request, model=MODEL, ttl_s=PREPARED_TTL_S)


def take_prepared(request_id: str) -> PreparedRequest:
    return prepared.take(_PREPARED_REQUESTS, request_id, model=MODEL, edge=EDGE)
