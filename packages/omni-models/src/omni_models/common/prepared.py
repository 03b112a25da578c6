"""The prepared-request handoff logic shared by Qwen3-TTS and Fun-CosyVoice3.

Each model keeps its own module-level ``_PREPROCESSING_CONTEXT`` /
``_PREPARED_REQUESTS`` dicts in its ``handoff`` module (that module memory is
the process-local state its contract declares); these functions hold the logic
once and take the dicts as arguments. A missing entry raises an error naming
the edge, never rebuilds.
"""

from __future__ import annotations

import time
from typing import Any

from omni_models.common.queue import HandoffError


def missing(model: str, edge: str, what: str) -> HandoffError:
    return HandoffError(f"{model}: {what}: the handoff {edge} is process-local; keep both stages in one process")


def context_of(contexts: dict[str, Any], model: str, edge: str) -> Any:
    context = contexts.get(model)
    if context is None:
        raise missing(model, edge, "no preprocessing context in this process (build preprocessing before tts_engine)")
    return context


def put(requests: dict[str, tuple[float, Any]], request_id: str, prepared: Any, *, model: str, ttl_s: float) -> None:
    """Store one prepared request; entries older than ``ttl_s`` are dropped first.

    The stage contract has no per-stage abort hook, so a request cancelled
    between preprocessing and the engine would otherwise leave its entry behind.
    """
    now = time.monotonic()
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
