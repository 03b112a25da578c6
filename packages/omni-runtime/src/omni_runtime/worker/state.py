"""One request as a worker process sees it (the value :mod:`.requests` keeps per request id)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..flow import CreditGate
from ..payload import StagePayload
from .channel import ChunkChannel

if TYPE_CHECKING:
    pass


@dataclass
class RequestState:
    """One request as this process sees it: its binding, cancel flag, running stage tasks and open streams."""

    rid: str
    binding: dict[str, int]
    cancel: asyncio.Event
    timings: dict[str, float] = field(default_factory=dict)
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    channels: dict[str, ChunkChannel] = field(default_factory=dict)
    parts: dict[str, dict[str, StagePayload]] = field(default_factory=dict)
    deadline: float | None = None
    """``time.monotonic()`` instant after which the request's work here is cancelled (``ctx.deadline``)."""
    wall_deadline: float | None = None
    """The same deadline in epoch seconds, as it travels to the next process."""
    expiry: asyncio.TimerHandle | None = None
    gates: dict[tuple[str, str], CreditGate] = field(default_factory=dict)
    """Credit per (consumer stage, consumer instance) for chunks this process streams to another."""

    def close(self) -> None:
        """The request is done here: drop its deadline timer."""
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None
