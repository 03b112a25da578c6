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
    ``session.updated`` {session: {..., text_append}}, ``response.created`` {response_id},
    ``audio.delta`` {response_id, segment, audio (base64)}, ``segment.done`` {response_id, segment, text, audio_seconds},
    ``response.done`` {response_id, status: completed | incomplete | cancelled | failed, status_details?, segments, failed_segments,
    first_audio_seconds} (``completed`` only when every segment was spoken; see :meth:`~.ws_items.Response.outcome`),
    ``error`` {error: OpenAI's envelope, response_id?, segment?}, ``session.done``

How text becomes requests depends on the model (``text_append`` in ``session.updated``):

* a model whose entry stage takes text while it generates (``Runtime.supports_append``: the
  Qwen3-TTS 12 Hz checkpoints) gets *true append*: the response's words
  (:class:`~.segmenter.WordPieces`) go to ONE running request as they arrive; a flush, the
  response's end or ``MAX_UNIT_CHARS`` closes its input, and the next words start the
  response's next segment (a new request);
* every other model gets segments (:class:`~.segmenter.TextSegmenter`: clauses and
  sentences), each synthesised as a request of its own.

The reader (this module) turns messages into queued segments; :mod:`.ws_synthesis` turns
them into audio; :mod:`.ws_items` holds the values both share. Held-back text is bounded
(``input_buffer_full``). Cutting text runs off the event loop, on a copy of the socket's
segmenter, within the socket's CPU budget (:mod:`.text_work`). Every mistake is an ``error`` message and the socket stays open;
only a failed authentication or origin check closes it (1008).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import logging
import secrets
import time
from collections import deque
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from .errors import APIError
from .request import parse_body, parse_speech, utf8
from .segmenter import TextSegmenter, WordPieces, speakable
from .text_work import CpuBudget
from .timestamps import check_timestamps
from .ws_access import KEY_PROTOCOL_PREFIX, authorised, origin_allowed
from .ws_items import Close, End, Response, Segment, StreamLimits, StreamMetrics, TextFeed, client_error, elapsed
from .ws_synthesis import SegmentSynthesis

STREAM = "/v1/audio/speech/stream"
log = logging.getLogger("uvicorn.error.omni")
_SESSION_ONLY = frozenset({"sample_rate", "text_append"})
MIN_RATE, MAX_RATE = 8000, 48000

__all__ = ["STREAM", "StreamLimits", "StreamSession", "install_stream_route"]


class StreamSession(SegmentSynthesis):
    """One socket: a reader that cuts text into segments (or appends it, ``text_append``), a synthesiser
    (:class:`~.ws_synthesis.SegmentSynthesis`) that turns segments into audio in order."""

    def __init__(self, ws: WebSocket, app_state: Any, limits: StreamLimits, stream_metrics: StreamMetrics) -> None:
        super().__init__(ws, app_state, stream_metrics)
        self.limits = limits
        self.session_fields: dict[str, Any] = {}
        """Every field the client set so far: each session.update changes only the fields it names."""
        self.append_choice: bool | None = None
        """The client's ``text_append`` (None: append where the model can)."""
        self.appending = False
        """This response's words go to one running request (decided as each response starts)."""
        self.segmenter: TextSegmenter | WordPieces = TextSegmenter(limits.segments)
        """Replaced, never changed in place, while text is cut off the loop (:meth:`_segmented`)."""
        self.text_budget = CpuBudget()
        self.response: Response | None = None
        """The response that is receiving text."""
        self.unit: Segment | None = None
        """True append: the segment whose request takes the response's next words (its input is open)."""
        self.next_index = 0

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
            await self._stop_feeders()

    # --- reading -------------------------------------------------------------------------------------

    async def _read(self) -> bool:
        """Read until the client disconnects (False) or sends ``session.close`` (True)."""
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                return False
            if message.get("text") is None:
                await self.error(client_error("binary frames are not part of this protocol; send JSON text messages", "invalid_message_type"))
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
            self._enqueue(await self._segmented("flush"))
            self._close_unit()
        elif kind == "input_text.done":
            await self._done()
        elif kind == "response.cancel":
            await self._cancel()
        elif kind == "session.update":
            await self._update(body.get("session"))
        elif kind == "session.close":
            if self.response is not None:
                await self._done()
            self._push(Close())
            return True
        else:
            known = "session.update, input_text.delta, input_text.flush, input_text.done, response.cancel, session.close"
            raise client_error(f"unknown message type {str(kind)[:64]!r}; send one of {known}", "unknown_message_type", "type")
        return False

    async def _update(self, session: Any) -> None:
        if self.response is not None or self.synthesising is not None or self.queue:
            raise APIError(409, "a response is in progress; send session.update between responses (after response.done)",
                           code="response_in_progress")
        if not isinstance(session, dict):
            raise client_error("session.update needs a 'session' object", "invalid_value", "session")
        fields = {**self.session_fields, **{k: v for k, v in session.items() if k not in _SESSION_ONLY}}
        fields.setdefault("response_format", self.speech.response_format)
        speech = parse_speech({**fields, "input": "-"}, self.settings.models, self.settings.limits)
        check_timestamps(speech.extra, getattr(self.runtime, "topology", None))
        rate = session.get("sample_rate", self.sample_rate)
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int) or not MIN_RATE <= rate <= MAX_RATE):
            raise client_error(f"session.sample_rate {rate!r} must be an integer from {MIN_RATE} to {MAX_RATE} (Hz)", "invalid_value", "sample_rate")
        choice = session.get("text_append", self.append_choice)
        if choice is not None and not isinstance(choice, bool):
            raise client_error(f"session.text_append must be true or false, got {choice!r}", "invalid_value", "text_append")
        if choice and not self.can_append():
            raise client_error(f"model {speech.model!r} does not take text while it generates; its segments are synthesised separately "
                               "(send text_append false or leave it out)", "text_append_unsupported", "text_append")
        if speech.voice is not None and "ref_audio" not in speech.extra:
            await self.voices.resolve(speech)  # an uploaded voice must exist now, not fail every segment later
        self.append_choice = choice
        self.speech = dataclasses.replace(speech, stream=True, stream_format="audio")
        self.session_fields, self.sample_rate = fields, rate
        await self.send({"type": "session.updated", "session": self._session_view()})

    def _session_view(self) -> dict[str, Any]:
        s = self.speech
        return {"model": s.model, "voice": s.voice, "response_format": s.response_format, "sample_rate": self.sample_rate,
                "speed": s.speed, "instructions": s.instructions,
                "text_append": self.append_choice if self.append_choice is not None else self.can_append()}

    def can_append(self) -> bool:
        """Whether the model takes text while it generates (its entry stage has an append hook, reported at ready)."""
        supports = getattr(self.runtime, "supports_append", None)
        return bool(supports()) if callable(supports) else False

    def _held_chars(self) -> int:
        queued = sum(len(i.text) for i in self.queue if isinstance(i, Segment))
        return len(self.segmenter.pending) + queued + (self.unit.feed.waiting_chars if self.unit is not None and self.unit.feed else 0)

    async def _delta(self, delta: Any) -> None:
        if not isinstance(delta, str):
            raise client_error("input_text.delta needs 'delta': a string", "invalid_value", "delta")
        if len(delta) > self.limits.max_delta_chars:
            raise APIError(413, f"delta is {len(delta)} characters; at most {self.limits.max_delta_chars} per message. Split it",
                           param="delta", code="string_above_max_length")
        held = self._held_chars()
        if held + len(delta) > self.limits.segments.max_pending_chars:
            raise APIError(429, f"{held} characters are waiting to be spoken; this delta would pass the limit of "
                           f"{self.limits.segments.max_pending_chars}. Send it after more audio arrived", type="rate_limit_error",
                           param="delta", code="input_buffer_full")
        if not utf8(delta):
            raise client_error("input_text.delta 'delta' is not valid Unicode (it holds a lone surrogate); this delta was dropped, "
                               "the response goes on: send text encodable as UTF-8", "invalid_value", "delta")
        if self.response is None:
            await self._start_response()
        self._enqueue(await self._segmented("feed", delta))

    async def _segmented(self, step: str, *args: str) -> list[str]:
        """``segmenter.feed``/``flush`` in the text pool on a copy (the synthesiser may reset the segmenter meanwhile:
        then the copy and what it cut are dropped, as a reset drops held-back text)."""
        before = self.segmenter
        if step == "feed" and isinstance(before, TextSegmenter) and not before.would_cut(*args):
            return before.feed(*args)  # no boundary: the text is only held back
        work = copy.copy(before)
        pieces = await self.text_budget.run(getattr(work, step), *args)
        if self.segmenter is not before:
            return []
        self.segmenter = work
        return pieces

    def _new_segmenter(self) -> TextSegmenter | WordPieces:
        return WordPieces(self.limits.segments) if self.appending else TextSegmenter(self.limits.segments)

    async def _start_response(self) -> None:
        appending = self.append_choice if self.append_choice is not None else self.can_append()
        if appending != self.appending:  # between responses: nothing is held back
            self.appending = appending
            self.segmenter = self._new_segmenter()
        self.response = Response(f"resp_{secrets.token_hex(8)}", time.perf_counter())
        self.next_index = 0
        await self.send({"type": "response.created", "response_id": self.response.id})

    def _enqueue(self, pieces: list[str]) -> None:
        for text in pieces:
            if self.response is None:
                continue
            if not self.appending:
                if speakable(text):
                    self._push(Segment(self.response, self.next_index, text))
                    self.next_index += 1
                continue
            unit = self.unit
            if unit is not None and unit.feed is not None and unit.response is self.response and unit.feed.has_room(text):
                unit.feed.add(text)
                continue
            self._close_unit()
            if speakable(text):  # a request starts with something to say; a lone mark before it is dropped
                self.unit = Segment(self.response, self.next_index, text, TextFeed(text))
                self._push(self.unit)
                self.next_index += 1

    def _request_ended(self, item: Segment) -> None:
        """The running request ended with its input open: words it had not taken yet start the next segment."""
        assert item.feed is not None
        left, item.feed.queued = "".join(item.feed.queued), []
        item.feed.close()
        if self.unit is item:
            self.unit = None
            if left and item.response is self.response:
                self._enqueue([left.lstrip()])

    def _close_unit(self) -> None:
        """True append: the running request's input is complete (a flush, the response's end, a full request)."""
        if self.unit is not None and self.unit.feed is not None:
            self.unit.feed.close()
        self.unit = None

    def _push(self, item: Segment | End | Close) -> None:
        self.queue.append(item)
        self.wakeup.set()

    async def _done(self) -> None:
        if self.response is None:
            await self._start_response()
        self._enqueue(await self._segmented("flush"))
        self._close_unit()
        if self.response is None:  # abandoned while its text was cut: its response.done (failed) went out
            return
        self._push(End(self.response))
        self.response = None

    async def _cancel(self) -> None:
        """Barge-in: drop held-back and queued text, cancel the segment in flight (every stage), answer ``response.done``."""
        targets = {r.id: r for r in (self.response, self.synthesising) if r is not None}
        targets.update({i.response.id: i.response for i in self.queue if isinstance(i, (Segment, End))})
        if not targets:
            raise client_error("no response is in progress to cancel", "response_not_found")
        self.cancelled.extend(targets)
        self.segmenter = self._new_segmenter()
        self.unit = None
        self.response = self.synthesising = None
        self.queue = deque(i for i in self.queue if isinstance(i, Close) or i.response.id not in targets)
        current = self.current
        if current is not None and not current.done():
            current.cancel()
            with contextlib.suppress(BaseException):
                await current
        await self._drop_prefetched(set(targets))
        await self._stop_feeders()
        for response in targets.values():
            await self.send({"type": "response.done", "response_id": response.id, "status": "cancelled", "segments": response.queued,
                             "first_audio_seconds": elapsed(response)})

    async def _abandon(self, response: Response) -> None:
        """Drop the rest of ``response`` (nothing can synthesise it now) and answer ``response.done`` ``failed``."""
        self.cancelled.append(response.id)
        if self.response is response:
            self.segmenter = self._new_segmenter()
            self.unit = None
            self.response = None
        self.queue = deque(i for i in self.queue if isinstance(i, Close) or i.response is not response)
        self.synthesising = None
        await self._drop_prefetched({response.id})
        codes = response.failure_codes or ["unavailable"]
        await self.send({"type": "response.done", "response_id": response.id, "status": "failed",
                         "status_details": {"type": "failed", "reason": codes[-1], "failed_segments": response.failed,
                                            "error_codes": sorted(set(codes))},
                         "segments": response.queued, "failed_segments": response.failed, "first_audio_seconds": elapsed(response)})


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


