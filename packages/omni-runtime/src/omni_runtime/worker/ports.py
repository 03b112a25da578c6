"""The narrow interfaces the worker's parts see of each other.

The forwarder hands a payload or a chunk for a stage of this same process to
whoever starts stages (the stage runner); it knows it only as
:class:`LocalDelivery`, so neither module imports the other.
"""

from __future__ import annotations

from typing import Protocol

from ..payload import StagePayload
from .channel import ChunkChannel
from .state import RequestState


class LocalDelivery(Protocol):
    """Starts this process's stages for a request."""

    def on_payload(self, req: RequestState, stage: str, src: str, payload: StagePayload) -> None:
        """A payload for ``stage`` from ``src`` (runs it, or its merge once every waited-for source arrived)."""

    def channel(self, req: RequestState, stage: str) -> ChunkChannel:
        """The stream into ``stage`` for ``req`` (created, and the consumer started, on first use)."""
