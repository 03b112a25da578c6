"""MOSS-TTS Delay's process-local handoff: the module-level ``PreparedRequestQueue``.

Preprocessing begins, prepares and publishes each request here; the AR stage pops it. In any
other process the queue is empty, so a forbidden split fails with an error naming the edge.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from omni_models.common.queue import PreparedRequestQueue
from omni_models.common.request import TextRequest

MODEL = "moss_tts_delay"

_PREPARED_QUEUE = PreparedRequestQueue(MODEL, src="preprocessing", dst="tts_engine")


@dataclass(frozen=True)
class PreparedRequest:
    text: TextRequest
    prompt_codes: torch.Tensor


def begin(request_id: str) -> None:
    _PREPARED_QUEUE.begin(request_id)


def publish(request_id: str, prepared: PreparedRequest) -> None:
    _PREPARED_QUEUE.publish(request_id, prepared)


def abort(request_id: str) -> None:
    _PREPARED_QUEUE.abort(request_id)


def pop(request_id: str) -> PreparedRequest:
    return _PREPARED_QUEUE.pop(request_id)
