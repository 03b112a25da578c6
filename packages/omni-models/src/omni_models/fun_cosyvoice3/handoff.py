"""Fun-CosyVoice3's process-local handoff from preprocessing to the AR engine.

``build_preprocessing`` registers the front end in ``_PREPROCESSING_CONTEXT``; the AR engine
builder reads it there (and refuses to build without it), and per request preprocessing stores
the prepared request in ``_PREPARED_REQUESTS`` for the engine to pop. Both dicts are plain
process memory, which is why ``preprocessing -> tts_engine`` is declared process-local.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from omni_models.common.queue import HandoffError
from omni_models.common.request import TextRequest

MODEL = "fun_cosyvoice3"
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
    prompt_tokens: torch.Tensor


def _missing(what: str) -> HandoffError:
    return HandoffError(f"{MODEL}: {what}: the handoff {EDGE} is process-local; keep both stages in one process")


def register_context(context: PreprocessingContext) -> None:
    _PREPROCESSING_CONTEXT[MODEL] = context


def preprocessing_context() -> PreprocessingContext:
    context = _PREPROCESSING_CONTEXT.get(MODEL)
    if context is None:
        raise _missing("no preprocessing context in this process (build preprocessing before tts_engine)")
    return context


def put_prepared(request_id: str, prepared: PreparedRequest) -> None:
    now = time.monotonic()
    for stale in [rid for rid, (t, _) in list(_PREPARED_REQUESTS.items()) if now - t > PREPARED_TTL_S]:
        _PREPARED_REQUESTS.pop(stale, None)
    if request_id in _PREPARED_REQUESTS:
        raise HandoffError(f"{MODEL}: request {request_id} was already prepared and not yet consumed")
    _PREPARED_REQUESTS[request_id] = (now, prepared)


def take_prepared(request_id: str) -> PreparedRequest:
    entry = _PREPARED_REQUESTS.pop(request_id, None)
    if entry is None:
        raise _missing(f"no prepared request for {request_id}")
    return entry[1]
