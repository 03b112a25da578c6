"""``/v1/audio/speech/stream``: a WebSocket where text arrives in pieces and audio leaves while it still arrives.

The protocol (JSON text frames both ways; docs/voice-agents.md has every field):

client -> server
    ``session.update`` {session: {model, voice, response_format, sample_rate, speed, instructions, ...}}
    ``input_text.delta`` {delta}      text of the current response (one is started by the first delta)
    ``input_text.flush``              synthesise what is held back now, without waiting for a sentence end
    ``input_text.done``               the response's text is complete (flushes; ``response.done`` follows)
    ``response.cancel``               barge-in: stop the current response at once, in every stage
    ``session.close``                 finish the current response, answer ``session.done``, close

server -> client
    ``session.updated``, ``response.created`` {response_id},
    ``audio.delta`` {response_id, segment, audio (base64)}, ``segment.done`` {response_id, segment, text, audio_seconds},
    ``response.done`` {response_id, status: completed | cancelled | failed, segments, failed_segments, first_audio_seconds},
    ``error`` {error: OpenAI's envelope, response_id?, segment?}, ``session.done``

Segments (:mod:`.segmenter`) are synthesised in order, one runtime request each; the next
segment of an answer is submitted once the current one has audio, so it is ready when the
current one ends. A model's engine never sees text appended to a running request (no model
here can extend one), so each segment is a request of its own. Flow control is the
socket's: sending waits while the client's TCP window and the transport's write buffer are
full, so the runtime's per-request credits stop the pipeline; nothing is buffered without
bound. Held-back text is bounded too (``input_buffer_full``). Every mistake is an
``error`` message and the socket stays open; only a failed authentication or origin check
closes it (1008).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import logging
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter, Gauge, Histogram
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from ..errors import RequestFailed, RuntimeFailure
from .audio import AudioError
from .encoders import StreamEncoder
from .errors import APIError, runtime_error
from .metrics import LATENCY_BUCKETS
from .request import SpeechRequest, parse_body, parse_speech
from .resampling import RateConverter
from .segmenter import SegmentLimits, TextSegmenter, speakable
from .streaming import cancel_quietly
from .synthesis import audio_parts
from .ws_access import KEY_PROTOCOL_PREFIX, authorised, origin_allowed

STREAM = "/v1/audio/speech/stream"
log = logging.getLogger("uvicorn.error.omni")
_SESSION_ONLY = frozenset({"sample_rate"})
MIN_RATE, MAX_RATE = 8000, 48000


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


@dataclass
class _Response:
    id: str
    started: float
    queued: int = 0
    failed: int = 0
    first_audio: float | None = None


@dataclass(frozen=True)
class _Segment:
    response: _Response
    index: int
    text: str


@dataclass(frozen=True)
class _End:
    response: _Response


class _Close:
    pass


def _client_error(message: str, code: str, param: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


class StreamSession:
    """One socket: a reader that segments text, a synthesiser that turns segments into audio in order."""

    def __init__(self, ws: WebSocket, app_state: Any, limits: StreamLimits, stream_metrics: StreamMetrics) -> None:
        self.ws = ws
        self.runtime, self.settings, self.metrics = app_state.runtime, app_state.settings, app_state.metrics
        self.voices = app_state.voices
        self.limits, self.stream_metrics = limits, stream_metrics
        self.speech = SpeechRequest(self.settings.models[0], "", None, "pcm", 1.0, True, "audio")
        self.session_fields: dict[str, Any] = {}
        """Every field the client set so far: each session.update changes only the fields it names."""
        self.sample_rate: int | None = None
        self.segmenter = TextSegmenter(limits.segments)
        self.queue: deque[_Segment | _End | _Close] = deque()
        self.wakeup = asyncio.Event()
        self.response: _Response | None = None
        """The response that is receiving text."""
        self.synthesising: _Response | None = None
        self.current: asyncio.Task[None] | None = None
        self.prefetched: tuple[_Segment, asyncio.Task[tuple[Any, SpeechRequest]]] | None = None
        """The next segment, submitted while the current one streams."""
        self.cancelled: deque[str] = deque(maxlen=64)
        """Recently cancelled responses (their queued items are gone; this only guards the item being taken)."""
        self.next_index = 0

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send_text(json.dumps(message, separators=(",", ":")))

    async def error(self, exc: APIError, **where: Any) -> None:
        self.stream_metrics.errors.labels(code=str(exc.code)).inc()
        await self.send({"type": "error", **exc.body(), **{k: v for k, v in where.items() if v is not None}})

    async def run(self) -> None:
        synth = asyncio.ensure_future(self._synthesise())
        try:
            if await self._read():  # session.close: the queued responses finish, then session.done
                await synth
        finally:
            synth.cancel()
            with contextlib.suppress(BaseException):
                await synth
            if self.current is not None and not self.current.done():
                self.current.cancel()
                with contextlib.suppress(BaseException):
                    await self.current
            await self._drop_prefetched()

    # --- reading -------------------------------------------------------------------------------------

    async def _read(self) -> bool:
        """Read until the client disconnects (False) or sends ``session.close`` (True)."""
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                return False
            if message.get("text") is None:
                await self.error(_client_error("binary frames are not part of this protocol; send JSON text messages", "invalid_message_type"))
                continue
            try:
                if await self._handle(message["text"]):
                    return True
            except APIError as exc:
                await self.error(exc)

    async def _handle(self, text: str) -> bool:
        if len(text) > self.limits.max_message_chars:
            raise APIError(413, f"message is {len(text)} characters; the limit is {self.limits.max_message_chars}. Send the text as several deltas",
                           code="message_too_large")
        body = parse_body(text.encode("utf-8", "surrogatepass"))
        kind = body.get("type")
        if kind == "input_text.delta":
            await self._delta(body.get("delta"))
        elif kind == "input_text.flush":
            self._enqueue(self.segmenter.flush())
        elif kind == "input_text.done":
            await self._done()
        elif kind == "response.cancel":
            await self._cancel()
        elif kind == "session.update":
            await self._update(body.get("session"))
        elif kind == "session.close":
            if self.response is not None:
                await self._done()
            self._push(_Close())
            return True
        else:
            known = "session.update, input_text.delta, input_text.flush, input_text.done, response.cancel, session.close"
            raise _client_error(f"unknown message type {str(kind)[:64]!r}; send one of {known}", "unknown_message_type", "type")
        return False

    async def _update(self, session: Any) -> None:
        if self.response is not None or self.synthesising is not None or self.queue:
            raise APIError(409, "a response is in progress; send session.update between responses (after response.done)",
                           code="response_in_progress")
        if not isinstance(session, dict):
            raise _client_error("session.update needs a 'session' object", "invalid_value", "session")
        fields = {**self.session_fields, **{k: v for k, v in session.items() if k not in _SESSION_ONLY}}
        fields.setdefault("response_format", self.speech.response_format)
        speech = parse_speech({**fields, "input": "-"}, self.settings.models, self.settings.limits)
        rate = session.get("sample_rate", self.sample_rate)
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int) or not MIN_RATE <= rate <= MAX_RATE):
            raise _client_error(f"session.sample_rate {rate!r} must be an integer from {MIN_RATE} to {MAX_RATE} (Hz)", "invalid_value", "sample_rate")
        if speech.voice is not None and "ref_audio" not in speech.extra:
            await self.voices.resolve(speech)  # an uploaded voice must exist now, not fail every segment later
        self.speech = dataclasses.replace(speech, stream=True, stream_format="audio")
        self.session_fields, self.sample_rate = fields, rate
        await self.send({"type": "session.updated", "session": self._session_view()})

    def _session_view(self) -> dict[str, Any]:
        s = self.speech
        return {"model": s.model, "voice": s.voice, "response_format": s.response_format, "sample_rate": self.sample_rate,
                "speed": s.speed, "instructions": s.instructions}

    async def _delta(self, delta: Any) -> None:
        if not isinstance(delta, str):
            raise _client_error("input_text.delta needs 'delta': a string", "invalid_value", "delta")
        if len(delta) > self.limits.max_delta_chars:
            raise APIError(413, f"delta is {len(delta)} characters; at most {self.limits.max_delta_chars} per message. Split it",
                           param="delta", code="string_above_max_length")
        held = len(self.segmenter.pending) + sum(len(i.text) for i in self.queue if isinstance(i, _Segment))
        if held + len(delta) > self.limits.segments.max_pending_chars:
            raise APIError(429, f"{held} characters are waiting to be spoken; this delta would pass the limit of "
                           f"{self.limits.segments.max_pending_chars}. Send it after more audio arrived", type="rate_limit_error",
                           param="delta", code="input_buffer_full")
        if self.response is None:
            await self._start_response()
        self._enqueue(self.segmenter.feed(delta))

    async def _start_response(self) -> None:
        self.response = _Response(f"resp_{secrets.token_hex(8)}", time.perf_counter())
        self.next_index = 0
        await self.send({"type": "response.created", "response_id": self.response.id})

    def _enqueue(self, segments: list[str]) -> None:
        for text in segments:
            if self.response is None or not speakable(text):
                continue
            self._push(_Segment(self.response, self.next_index, text))
            self.next_index += 1

    def _push(self, item: _Segment | _End | _Close) -> None:
        self.queue.append(item)
        self.wakeup.set()

    async def _done(self) -> None:
        if self.response is None:
            await self._start_response()
        self._enqueue(self.segmenter.flush())
        assert self.response is not None
        self._push(_End(self.response))
        self.response = None

    async def _cancel(self) -> None:
        """Barge-in: drop held-back and queued text, cancel the segment in flight (every stage), answer ``response.done``."""
        targets = {r.id: r for r in (self.response, self.synthesising) if r is not None}
        targets.update({i.response.id: i.response for i in self.queue if isinstance(i, (_Segment, _End))})
        if not targets:
            raise _client_error("no response is in progress to cancel", "response_not_found")
        self.cancelled.extend(targets)
        self.segmenter.reset()
        self.response = self.synthesising = None
        self.queue = deque(i for i in self.queue if isinstance(i, _Close) or i.response.id not in targets)
        current = self.current
        if current is not None and not current.done():
            current.cancel()
            with contextlib.suppress(BaseException):
                await current
        await self._drop_prefetched(set(targets))
        for response in targets.values():
            await self.send({"type": "response.done", "response_id": response.id, "status": "cancelled", "segments": response.queued,
                             "first_audio_seconds": _elapsed(response)})

    async def _abandon(self, response: _Response) -> None:
        """Drop the rest of ``response`` (nothing can synthesise it now) and answer ``response.done`` ``failed``."""
        self.cancelled.append(response.id)
        if self.response is response:
            self.segmenter.reset()
            self.response = None
        self.queue = deque(i for i in self.queue if isinstance(i, _Close) or i.response is not response)
        self.synthesising = None
        await self._drop_prefetched({response.id})
        await self.send({"type": "response.done", "response_id": response.id, "status": "failed", "segments": response.queued,
                         "failed_segments": response.failed, "first_audio_seconds": _elapsed(response)})

    # --- synthesis -----------------------------------------------------------------------------------

    async def _synthesise(self) -> None:
        while True:
            while not self.queue:
                self.wakeup.clear()
                await self.wakeup.wait()
            item = self.queue.popleft()
            if isinstance(item, _Close):
                await self.send({"type": "session.done"})
                await self.ws.close(1000)
                return
            if item.response.id in self.cancelled:
                continue
            if isinstance(item, _End):
                self.synthesising = None
                await self.send({"type": "response.done", "response_id": item.response.id, "status": "completed",
                                 "segments": item.response.queued, "failed_segments": item.response.failed,
                                 "first_audio_seconds": _elapsed(item.response)})
                continue
            self.synthesising = item.response
            self.current = asyncio.ensure_future(self._segment(item))
            await asyncio.wait({self.current})
            self.current = None

    async def _submit(self, item: _Segment) -> tuple[Any, SpeechRequest]:
        speech = await self.voices.resolve(dataclasses.replace(self.speech, text=item.text.strip()))
        return await self.runtime.submit(speech.entry_data()), speech

    def _prefetch(self, current: _Segment) -> None:
        """Submit the answer's next segment while this one streams: the engine works on both, and the next
        segment's audio follows without the gap of a fresh request's first chunk. Its output waits in the
        runtime, bounded by the request's credits, until this segment is sent."""
        following = self.queue[0] if self.queue else None
        if self.prefetched is None and isinstance(following, _Segment) and following.response is current.response:
            self.prefetched = (following, asyncio.ensure_future(self._submit(following)))

    async def _drop_prefetched(self, responses: set[str] | None = None) -> None:
        """Cancel the prefetched request (of one of ``responses``, or any) in every stage."""
        if self.prefetched is None or (responses is not None and self.prefetched[0].response.id not in responses):
            return
        _, task = self.prefetched
        self.prefetched = None
        try:
            handle, _ = await asyncio.shield(task)  # let admission finish, so the admitted request can be cancelled
        except BaseException:  # noqa: BLE001 - it failed to submit: nothing to cancel
            return
        await cancel_quietly(handle)
        self.stream_metrics.segments.labels(model=self.speech.model, outcome="cancelled").inc()

    async def _segment(self, item: _Segment) -> None:
        response = item.response
        response.queued += 1
        model = self.speech.model
        where = {"response_id": response.id, "segment": item.index}
        try:
            if self.prefetched is not None and self.prefetched[0] is item:
                task, self.prefetched = self.prefetched[1], None
                handle, speech = await task
            else:
                handle, speech = await self._submit(item)
        except (APIError, RequestFailed, RuntimeFailure) as exc:
            failure = exc if isinstance(exc, APIError) else runtime_error(exc) if isinstance(exc, RequestFailed) else _unavailable()
            response.failed += 1
            self.stream_metrics.segments.labels(model=model, outcome="failed").inc()
            await self.error(failure, **where)
            if failure.status == 503:  # the server is draining or the pipeline is down: the rest of the answer fails as one
                await self._abandon(response)
            return
        seconds = 0.0
        outcome = "failed"
        try:
            encoder: StreamEncoder | None = None
            resampler: RateConverter | None = None
            async for part in audio_parts(handle):
                if self.sample_rate and part.sample_rate != self.sample_rate:
                    resampler = resampler or RateConverter(part.sample_rate, self.sample_rate, part.channels)
                    part = resampler.feed(part)
                if part.frames == 0:
                    continue
                encoder = encoder or StreamEncoder(speech.response_format, part.sample_rate, part.channels)
                seconds += part.frames / part.sample_rate
                await self._audio(item, encoder.feed(part))
                self._prefetch(item)
            if resampler is not None and encoder is not None:
                tail = resampler.finish()
                if tail.frames:
                    seconds += tail.frames / tail.sample_rate
                    await self._audio(item, encoder.feed(tail))
            if encoder is not None:
                await self._audio(item, encoder.finish())
            outcome = "completed"
            self.metrics.observe_audio(model, seconds)
            await self.send({"type": "segment.done", **where, "text": item.text, "audio_seconds": round(seconds, 4)})
        except asyncio.CancelledError:
            outcome = "cancelled"
            await cancel_quietly(handle)
            raise
        except RequestFailed as exc:
            if getattr(exc, "kind", "") == "invalid_request":
                await self.error(APIError(400, exc.message, param=getattr(exc, "param", None), code="invalid_value"), **where)
            else:
                await self.error(runtime_error(exc), **where)
        except AudioError as exc:
            await cancel_quietly(handle)
            await self.error(APIError(500, f"the pipeline produced invalid audio: {exc}", type="server_error", code="invalid_stage_output"), **where)
        finally:
            response.failed += outcome == "failed"
            self.stream_metrics.segments.labels(model=model, outcome=outcome).inc()

    async def _audio(self, item: _Segment, data: bytes) -> None:
        if not data:
            return
        response = item.response
        if response.first_audio is None:
            response.first_audio = time.perf_counter()
            self.stream_metrics.first_audio.labels(model=self.speech.model).observe(response.first_audio - response.started)
        await self.send({"type": "audio.delta", "response_id": response.id, "segment": item.index,
                         "audio": base64.b64encode(data).decode("ascii")})


def _elapsed(response: _Response) -> float | None:
    return None if response.first_audio is None else round(response.first_audio - response.started, 4)


def _unavailable() -> APIError:
    return APIError(503, "the pipeline is not accepting requests (starting or stopping)", type="server_error", code="unavailable")


def install_stream_route(app: Any, limits: StreamLimits | None = None) -> None:
    limits = limits or StreamLimits()
    stream_metrics = StreamMetrics(app.state.metrics.registry)

    @app.websocket(STREAM)
    async def speech_stream(ws: WebSocket) -> None:
        settings = app.state.settings
        key_ok, subprotocol = authorised(ws, settings.api_key)
        await ws.accept(subprotocol=subprotocol)
        problem = None
        if not origin_allowed(ws, settings.allowed_origins):
            problem = APIError(403, f"origin {ws.headers.get('origin')!r} may not open this socket; start the server with --allowed-origins "
                               "naming it", type="permission_error", code="origin_not_allowed")
        elif not key_ok:
            problem = APIError(401, "missing or wrong API key: send 'Authorization: Bearer <key>' or offer the subprotocol "
                               f"'{KEY_PROTOCOL_PREFIX}<key>'", type="authentication_error", code="invalid_api_key")
        if problem is not None:
            stream_metrics.errors.labels(code=str(problem.code)).inc()
            with contextlib.suppress(Exception):
                await ws.send_text(json.dumps({"type": "error", **problem.body()}))
                await ws.close(1008)
            return
        stream_metrics.sockets.inc()
        session = StreamSession(ws, app.state, limits, stream_metrics)
        try:
            await session.run()
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass  # the client went away mid-send
        finally:
            stream_metrics.sockets.dec()
            if ws.application_state != WebSocketState.DISCONNECTED and ws.client_state != WebSocketState.DISCONNECTED:
                with contextlib.suppress(Exception):
                    await ws.close(1000)


