"""The stream socket's synthesiser: queued segments become runtime requests, in order, and their audio messages.

The next segment of a response is submitted once the current one has audio, so it is ready
when the current one ends. A segment with a :class:`~.ws_items.TextFeed` (a model that
takes text while it generates) gets a feeder task from its submission on: every piece the
reader adds is appended to its running request (``RequestHandle.append``), and the close of
its feed closes the request's input. Flow control is the socket's: sending waits while the
client's TCP window and the transport's write buffer are full, so the runtime's per-request
credits stop the pipeline; nothing is buffered without bound.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import time
from collections import deque
from typing import Any

from ..errors import RequestFailed, RuntimeFailure
from .audio import AudioError
from .encoders import StreamEncoder
from .errors import APIError, runtime_error
from .request import SpeechRequest
from .resampling import RateConverter
from .streaming import cancel_quietly
from .synthesis import audio_parts
from .timestamps import WordLog, shifted
from .ws_items import Close, End, Response, Segment, StreamMetrics, TextFeed, elapsed, unavailable


class SegmentSynthesis:
    """The synthesising half of a stream session (:class:`~.ws_stream.StreamSession` adds the reader)."""

    def __init__(self, ws: Any, app_state: Any, stream_metrics: StreamMetrics) -> None:
        self.ws = ws
        self.runtime, self.settings, self.metrics = app_state.runtime, app_state.settings, app_state.metrics
        self.voices = app_state.voices
        self.stream_metrics = stream_metrics
        self.speech = SpeechRequest(self.settings.models[0], "", None, "pcm", 1.0, True, "audio")
        self.sample_rate: int | None = None
        self.queue: deque[Segment | End | Close] = deque()
        self.wakeup = asyncio.Event()
        self.synthesising: Response | None = None
        self.current: asyncio.Task[None] | None = None
        self.prefetched: tuple[Segment, asyncio.Task[tuple[Any, SpeechRequest]]] | None = None
        """The next segment, submitted while the current one streams."""
        self.feeders: set[asyncio.Task[None]] = set()
        """Tasks appending a running segment's pieces to its request."""
        self.cancelled: deque[str] = deque(maxlen=64)
        """Recently cancelled responses (their queued items are gone; this only guards the item being taken)."""

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send_text(json.dumps(message, separators=(",", ":")))

    async def error(self, exc: APIError, **where: Any) -> None:
        self.stream_metrics.errors.labels(code=str(exc.code)).inc()
        await self.send({"type": "error", **exc.body(), **{k: v for k, v in where.items() if v is not None}})

    async def _abandon(self, response: Response) -> None:
        raise NotImplementedError

    async def _synthesise(self) -> None:
        while True:
            while not self.queue:
                self.wakeup.clear()
                await self.wakeup.wait()
            item = self.queue.popleft()
            if isinstance(item, Close):
                await self.send({"type": "session.done"})
                await self.ws.close(1000)
                return
            if item.response.id in self.cancelled:
                continue
            if isinstance(item, End):
                self.synthesising = None
                await self.send({"type": "response.done", "response_id": item.response.id, **item.response.outcome(),
                                 "segments": item.response.queued, "failed_segments": item.response.failed,
                                 "first_audio_seconds": elapsed(item.response)})
                continue
            self.synthesising = item.response
            self.current = asyncio.ensure_future(self._segment(item))
            await asyncio.wait({self.current})
            self.current = None

    async def _submit(self, item: Segment) -> tuple[Any, SpeechRequest]:
        speech = await self.voices.resolve(dataclasses.replace(self.speech, text=item.text.lstrip() if item.feed else item.text.strip()))
        data = speech.entry_data()
        if item.feed is not None:
            data["input_open"] = True
        handle = await self.runtime.submit(data)
        if item.feed is not None:
            task = asyncio.ensure_future(self._feed(handle, item.feed))
            self.feeders.add(task)
            task.add_done_callback(self.feeders.discard)
        return handle, speech

    async def _feed(self, handle: Any, feed: TextFeed) -> None:
        """Append the feed's pieces to the running request until its input closes (or the request ends: its audio
        path reports why)."""
        with contextlib.suppress(RuntimeFailure):
            while True:
                pieces, closed = await feed.take()
                if pieces:
                    await handle.append({"text": pieces}, final=closed)
                    self.stream_metrics.appends.labels(model=self.speech.model).inc()
                elif closed:
                    await handle.close_input()
                if closed:
                    return

    async def _stop_feeders(self) -> None:
        for task in list(self.feeders):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def _prefetch(self, current: Segment) -> None:
        """Submit the answer's next segment while this one streams: the engine works on both, and the next
        segment's audio follows without the gap of a fresh request's first chunk. Its output waits in the
        runtime, bounded by the request's credits, until this segment is sent."""
        following = self.queue[0] if self.queue else None
        if self.prefetched is None and isinstance(following, Segment) and following.response is current.response:
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

    async def _segment(self, item: Segment) -> None:
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
            failure = exc if isinstance(exc, APIError) else runtime_error(exc) if isinstance(exc, RequestFailed) else unavailable()
            response.failed += 1
            response.failure_codes.append(str(failure.code))
            self.stream_metrics.segments.labels(model=model, outcome="failed").inc()
            if item.feed is not None and not item.feed.closed:
                self._request_ended(item)  # the words that follow try a request of their own
            await self.error(failure, **where)
            if failure.status == 503:  # the server is draining or the pipeline is down: the rest of the answer fails as one
                await self._abandon(response)
            return
        seconds = 0.0
        outcome = "failed"
        try:
            seconds = await self._stream_audio(item, handle, speech)
            outcome = "completed"
            self.metrics.observe_audio(model, seconds)
            await self.send({"type": "segment.done", **where, "text": item.spoken, "audio_seconds": round(seconds, 4)})
        except asyncio.CancelledError:
            outcome = "cancelled"
            await cancel_quietly(handle)
            raise
        except RequestFailed as exc:
            if getattr(exc, "kind", "") == "invalid_request":
                await self._failed(response, APIError(400, exc.message, param=getattr(exc, "param", None), code="invalid_value"), where)
            else:
                await self._failed(response, runtime_error(exc), where)
        except AudioError as exc:
            await cancel_quietly(handle)
            await self._failed(response, APIError(500, f"the pipeline produced invalid audio: {exc}", type="server_error",
                                                  code="invalid_stage_output"), where)
        finally:
            response.failed += outcome == "failed"
            self.stream_metrics.segments.labels(model=model, outcome=outcome).inc()
            if item.feed is not None and not item.feed.closed:
                self._request_ended(item)

    async def _failed(self, response: Response, failure: APIError, where: dict[str, Any]) -> None:
        response.failure_codes.append(str(failure.code))
        await self.error(failure, **where)

    def _request_ended(self, item: Segment) -> None:
        """A request whose input was still open ended (the model spoke its end, ``max_new_tokens``, a failure):
        the reader starts a new segment for the words that follow."""
        if item.feed is not None:
            item.feed.close()

    async def _stream_audio(self, item: Segment, handle: Any, speech: SpeechRequest) -> float:
        """Send the request's audio as ``audio.delta`` messages (resampled, encoded); its seconds."""
        seconds = 0.0
        encoder: StreamEncoder | None = None
        resampler: RateConverter | None = None
        words = WordLog() if speech.extra.get("timestamps") == "word" else None
        async for part in audio_parts(handle, words):
            if self.sample_rate and part.sample_rate != self.sample_rate:
                resampler = resampler or RateConverter(part.sample_rate, self.sample_rate, part.channels)
                part = resampler.feed(part)
            if part.frames == 0:
                continue
            encoder = encoder or StreamEncoder(speech.response_format, part.sample_rate, part.channels)
            seconds += part.frames / part.sample_rate
            await self._audio(item, encoder.feed(part))
            await self._words(item, words)
            self._prefetch(item)
        if resampler is not None and encoder is not None:
            tail = resampler.finish()
            if tail.frames:
                seconds += tail.frames / tail.sample_rate
                await self._audio(item, encoder.feed(tail))
        if encoder is not None:
            await self._audio(item, encoder.finish())
        await self._words(item, words)
        item.response.audio_seconds += seconds
        return seconds

    async def _words(self, item: Segment, words: WordLog | None) -> None:
        """``audio.words``: the words of the audio sent so far, in seconds from the start of the response."""
        new = words.take_new() if words is not None else None
        if new:
            await self.send({"type": "audio.words", "response_id": item.response.id, "segment": item.index,
                             "words": shifted(new, item.response.audio_seconds)})

    async def _audio(self, item: Segment, data: bytes) -> None:
        if not data:
            return
        response = item.response
        if response.first_audio is None:
            response.first_audio = time.perf_counter()
            self.stream_metrics.first_audio.labels(model=self.speech.model).observe(response.first_audio - response.started)
        await self.send({"type": "audio.delta", "response_id": response.id, "segment": item.index,
                         "audio": base64.b64encode(data).decode("ascii")})
