"""The stream socket's values: its limits and metrics, and the items its reader queues for its synthesiser.

A response (one utterance) is cut into segments; each segment is one runtime request. For a
model that takes text while it generates (``Runtime.supports_append``), a segment carries a
:class:`TextFeed`: the words that arrive after its request started are appended to that same
request, until a flush or the end of the response closes its input.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from .errors import APIError
from .metrics import LATENCY_BUCKETS
from .segmenter import SegmentLimits

MAX_UNIT_CHARS = 2000
"""Text one appended-to request takes at most; past it the next words start the response's next segment
(a model bounds one request's text and frames)."""


@dataclass(frozen=True)
class StreamLimits:
    max_message_chars: int = 64 * 1024
    """Longest client message; longer is answered with ``message_too_large``."""
    max_delta_chars: int = 4096
    segments: SegmentLimits = field(default_factory=SegmentLimits)


class StreamMetrics:
    def __init__(self, registry: Any) -> None:
        self.sockets = Gauge("omni_ws_sessions_open", "Open /v1/audio/speech/stream sockets.", registry=registry)
        self.segments = Counter("omni_ws_segments", "Segments of streamed text by outcome.", ["model", "outcome"], registry=registry)
        self.first_audio = Histogram(
            "omni_ws_first_audio_seconds", "From a response's first text delta to its first audio message.", ["model"],
            buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.errors = Counter("omni_ws_errors", "Error messages sent on the stream socket, by code.", ["code"], registry=registry)
        self.appends = Counter("omni_ws_appends", "Text pieces appended to a running request (true append).", ["model"], registry=registry)


@dataclass
class Response:
    id: str
    started: float
    queued: int = 0
    failed: int = 0
    first_audio: float | None = None
    audio_seconds: float = 0.0
    """Audio of the segments finished so far (word times of the next segment count from here)."""
    failure_codes: list[str] = field(default_factory=list)
    """The error code of each failed or refused segment, in order (``overloaded``, ``invalid_value``...)."""

    def outcome(self) -> dict[str, Any]:
        """``status`` and ``status_details`` of the finished response: ``completed`` only when every segment was spoken;
        ``incomplete`` when some were refused or failed, ``failed`` when all were (as OpenAI's realtime
        ``response.done`` reports them), with the reason: the commonest error code."""
        if not self.failed:
            return {"status": "completed"}
        status = "failed" if self.failed >= self.queued else "incomplete"
        codes = self.failure_codes or ["failed"]
        reason = max(dict.fromkeys(codes), key=codes.count)
        return {"status": status, "status_details": {"type": status, "reason": reason, "failed_segments": self.failed,
                                                     "error_codes": sorted(set(codes))}}


class TextFeed:
    """The text of one appended-to request: its first words, then pieces the session appends while it runs."""

    def __init__(self, first: str) -> None:
        self.text = first
        self.queued: list[str] = []
        self.closed = False
        self._changed = asyncio.Event()

    @property
    def waiting_chars(self) -> int:
        return sum(len(p) for p in self.queued)

    def has_room(self, piece: str) -> bool:
        return not self.closed and len(self.text) + len(piece) <= MAX_UNIT_CHARS

    def add(self, piece: str) -> None:
        self.queued.append(piece)
        self.text += piece
        self._changed.set()

    def close(self) -> None:
        self.closed = True
        self._changed.set()

    async def take(self) -> tuple[str, bool]:
        """Every piece queued since the last call (waits for one, or the close), and whether the input is closed."""
        while not self.queued and not self.closed:
            self._changed.clear()
            await self._changed.wait()
        pieces, self.queued = "".join(self.queued), []
        return pieces, self.closed


@dataclass(frozen=True)
class Segment:
    response: Response
    index: int
    text: str
    """The text its request was submitted with (with a feed, the words that followed are in ``feed.text``)."""
    feed: TextFeed | None = None

    @property
    def spoken(self) -> str:
        return self.feed.text if self.feed is not None else self.text


@dataclass(frozen=True)
class End:
    response: Response


class Close:
    pass


def client_error(message: str, code: str, param: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def elapsed(response: Response) -> float | None:
    return None if response.first_audio is None else round(response.first_audio - response.started, 4)


def unavailable() -> APIError:
    return APIError(503, "the pipeline is not accepting requests (starting or stopping)", type="server_error", code="unavailable")
