"""Runtime-wide settings every worker gets, as JSON (no pickle crosses the process boundary)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class WorkerOptions:
    """Runtime-wide settings every worker gets (JSON, no pickle)."""

    device: str | None = None
    model_path: str | None = None
    enforce_memory_fraction: bool = False
    stage_threads: int = 64
    shm_budget_bytes: int = 1 << 30
    log_level: str = "info"
    log_format: str = "text"
    heartbeat_interval: float = 1.0
    """Seconds between the worker's heartbeats to the parent once ready (0: none)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerOptions:
        return cls(**json.loads(text))
