"""The value every stage receives and returns (docs/stage-contract.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class StagePayload:
    """One request's data as it moves between stages.

    Inside one OS process the runtime hands this very object to the next stage
    (no copy, no codec). Across processes only ``request_id`` and ``data`` travel,
    so ``data`` must hold codec types: dict, list, tuple, str, int, float, bool,
    None, bytes and ``torch.Tensor``.
    """

    request_id: str
    data: dict[str, Any] = field(default_factory=dict)
