"""What a worker knows while it serves: its stages, its peers, and the requests in flight here.

:class:`Worker` is assembled from three sides that share this state:
:mod:`.inbound` (messages in), :mod:`.execution` (running stages) and
:mod:`.outbound` (results, chunks and done signals out). Each side's methods
are in its own module; the attributes they share are declared here once.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from omni_compiler.topology import CompiledTopology, ProcessInstance, StagePlacement

from ..flow import CreditGate
from ..payload import StagePayload
from ..routing import Router
from .build import BuiltStages
from .channel import ChunkChannel
from .options import WorkerOptions

if TYPE_CHECKING:
    from ..plane import Plane
    from ..transport import AsyncOutbox


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
    """Epoch seconds after which the request's work here is cancelled."""
    expiry: asyncio.TimerHandle | None = None
    gates: dict[tuple[str, str], CreditGate] = field(default_factory=dict)
    """Credit per (consumer stage, consumer instance) for chunks this process streams to another."""

    def close(self) -> None:
        """The request is done here: drop its deadline timer."""
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None


class WorkerState:
    """The attributes the worker's sides share (set by :class:`~omni_runtime.worker.core.Worker`)."""

    topology: CompiledTopology
    instance: ProcessInstance
    name: str
    options: WorkerOptions
    router: Router
    local: dict[str, StagePlacement]
    stages: BuiltStages
    requests: dict[str, RequestState]
    finished: OrderedDict[str, None]
    loop: asyncio.AbstractEventLoop
    plane: Plane
    to_parent: AsyncOutbox
