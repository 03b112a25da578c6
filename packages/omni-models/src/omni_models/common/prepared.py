"""The prepared-request handoff logic shared by Qwen3-TTS and Fun-CosyVoice3.

Each model keeps its own module-level ``_PREPROCESSING_CONTEXT`` /
``_PREPARED_REQUESTS`` dicts in its ``handoff`` module (that module memory is
the process-local state its contract declares, so it stays in the model's
folder); these functions hold the logic once and take the dicts as arguments.
``build_preprocessing`` registers the front end in ``_PREPROCESSING_CONTEXT``,
the AR engine builder reads it there (and refuses to build without it), and per
request preprocessing stores the prepared request in ``_PREPARED_REQUESTS`` for
the engine to pop. A missing entry raises an error naming the edge, never rebuilds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from omni_models.common.queue import HandoffError
from omni_models.common.request import TextRequest

#: The stage contract has no per-stage abort hook: a request cancelled between preprocessing and
#: the engine would leave its entry behind, so entries older than this are dropped on each put.
PREPARED_TTL_S = 600.0


@dataclass(frozen=True)
class PreprocessingContext:
    """What the engine builder takes from the front end: the sizes the engine must match."""

    speaker_dim: int
    tokenizer_vocab: int

    def check(self, cond_dim: int, text_vocab: int, model: str) -> None:
        if (self.speaker_dim, self.tokenizer_vocab) != (cond_dim, text_vocab):
            raise ValueError(
                f"{model}: preprocessing produces speaker dim {self.speaker_dim} / vocab {self.tokenizer_vocab}, "
                f"the AR model expects {cond_dim} / {text_vocab}"
            )


@dataclass(frozen=True)
class PreparedRequest:
    """What preprocessing leaves for the engine; it never leaves the process, so it needs no wire form."""

    text: TextRequest
    speaker: torch.Tensor
    prompt_tokens: torch.Tensor | None = None


def missing(model: str, edge: str, what: str) -> HandoffError:
    return HandoffError(f"{model}: {what}: the handoff {edge} is process-local; keep both stages in one process")


def register(contexts: dict[str, Any], model: str, context: PreprocessingContext) -> None:
    contexts[model] = context


def context_of(contexts: dict[str, Any], model: str, edge: str) -> Any:
    context = contexts.get(model)
    if context is None:
        raise missing(model, edge, "no preprocessing context in this process (build preprocessing before tts_engine)")
    return context


def put(requests: dict[str, tuple[float, Any]], request_id: str, prepared: Any, *, model: str, ttl_s: float | None = None) -> None:
    """Store one prepared request; entries older than ``ttl_s`` are dropped first.

    The stage contract has no per-stage abort hook, so a request cancelled
    between preprocessing and the engine would otherwise leave its entry behind.
    """
    now = time.monotonic()
    ttl_s = PREPARED_TTL_S if ttl_s is None else ttl_s
    for stale in [rid for rid, (stored, _) in list(requests.items()) if now - stored > ttl_s]:
        requests.pop(stale, None)
    if request_id in requests:
        raise HandoffError(f"{model}: request {request_id} was already prepared and not yet consumed")
    requests[request_id] = (now, prepared)


def take(requests: dict[str, tuple[float, Any]], request_id: str, *, model: str, edge: str) -> Any:
    entry = requests.pop(request_id, None)
    if entry is None:
        raise missing(model, edge, f"no prepared request for {request_id}")
    return entry[1]
