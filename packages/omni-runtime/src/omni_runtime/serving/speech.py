"""``POST /v1/audio/speech``: read a bounded body, validate it, run the request, answer in one of three shapes.

- a whole file (no ``stream_format``): the response starts once the audio is complete;
- raw streamed audio (``stream_format: "audio"`` or ``stream: true``): encoded chunks as the terminal
  stage emits them, in any format;
- server-sent events (``stream_format: "sse"``): OpenAI's ``speech.audio.delta`` events with base64
  audio, then one ``speech.audio.done`` with usage.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.requests import ClientDisconnect

from ..errors import RequestFailed, RuntimeFailure
from .audio import CONTENT_TYPES, AudioError, PcmAudio, encode
from .encoders import StreamEncoder
from .errors import RETRY_AFTER_S, APIError, runtime_error
from .metrics import ServingMetrics, stream_origin
from .request import SpeechRequest, parse_body, parse_speech
from .streaming import AudioStreamResponse, ClientGone, until_disconnect
from .synthesis import audio_parts, collect_audio
from .timestamps import WordLog, check_timestamps

log = logging.getLogger("uvicorn.error.omni")
"""A child of uvicorn's error logger, so its lines appear at the server's --log-level."""
SPEECH = "/v1/audio/speech"
access_log = logging.getLogger("omni.access")
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")


class Disconnected(Exception):
    """The client went away before a response could start."""


def client_request_id(request: Request) -> str | None:
    """The client's ``X-Request-Id`` when it is a plausible id (bounded, printable, no spaces)."""
    value = request.headers.get("x-request-id")
    return value if value and _REQUEST_ID.fullmatch(value) else None


async def handle_speech(request: Request, runtime: Any, settings: Any, metrics: ServingMetrics, started: float) -> Response:
    raw = await read_body(request, settings.limits.max_body_bytes, settings.body_timeout)
    body = parse_body(raw)
    named = body.get("model", settings.models[0])
    if named in settings.models:  # label the request's metrics with its model even when it is rejected
        request.state.model = named
    speech = await request.app.state.voices.resolve(parse_speech(body, settings.models, settings.limits))
    timed = check_timestamps(speech.extra, getattr(runtime, "topology", None), shape=None if speech.sse else "an audio file or raw audio stream")
    metrics.input_characters.labels(model=speech.model).inc(len(speech.text))
    request.state.chars = len(speech.text)
    try:
        handle = await runtime.submit(speech.entry_data())
    except RequestFailed as exc:  # overloaded (429), a process down for good, a deadline passed while waiting
        raise runtime_error(exc) from None
    except RuntimeFailure:
        if getattr(runtime, "draining", False):
            raise APIError(503, "the server is shutting down; retry on another instance", type="server_error", code="shutdown",
                           headers={"Retry-After": RETRY_AFTER_S}) from None
        if "starting" in (runtime.health().get("processes") or {}).values():
            raise APIError(503, "the pipeline is still starting; retry once GET /health answers 200", type="server_error",
                           code="starting", headers={"Retry-After": "5"}) from None
        raise APIError(503, "the runtime is not accepting requests (it is stopping or stopped)", type="server_error", code="unavailable") from None
    request_id = client_request_id(request) or str(getattr(handle, "request_id", ""))
    request.state.request_id = request_id

    metrics.in_flight.inc()
    handed_over = False  # once the stream response exists, it owns in_flight and the metrics
    try:
        if not speech.stream:
            audio = await guarded(until_disconnect(request, handle, collect_audio(handle)))
            metrics.observe_stages(getattr(handle, "stage_timings", None), speech.model)
            _observe_queue_waits(metrics, runtime, handle, speech.model)
            metrics.observe_audio(speech.model, audio.frames / audio.sample_rate)
            request.state.audio_s = audio.frames / audio.sample_rate
            body = encode(audio, speech.response_format)
            return Response(body, media_type=CONTENT_TYPES[speech.response_format], headers=_audio_headers(audio, request_id))
        words = WordLog() if timed else None
        parts = audio_parts(handle, words).__aiter__()
        first = await guarded(until_disconnect(request, handle, parts.__anext__()))
        handed_over = True
    finally:
        if not handed_over:
            metrics.in_flight.dec()

    seconds = [0.0]
    listener = metrics.streams.track(speech.model, *stream_origin(getattr(runtime, "topology", None), getattr(handle, "instances", ())), started)

    def counted(part: PcmAudio) -> PcmAudio:
        seconds[0] += part.frames / part.sample_rate
        listener.chunk(part.frames / part.sample_rate)  # audio SLO metrics: a chunk leaving now
        return part

    def done(status: int) -> None:
        metrics.in_flight.dec()
        metrics.observe_request(SPEECH, status, time.perf_counter() - started, speech.model)
        metrics.observe_audio(speech.model, seconds[0])
        request.state.audio_s = seconds[0]
        log_access(request, status, started)
        if status == 200:
            metrics.observe_stages(getattr(handle, "stage_timings", None), speech.model)
            _observe_queue_waits(metrics, runtime, handle, speech.model)
            listener.finish()

    metrics.first_audio.labels(model=speech.model).observe(time.perf_counter() - started)
    chunks = _encoded(counted(first), parts, speech, counted)
    if speech.sse:
        body, media_type = _sse(chunks, speech, words), "text/event-stream"
    else:
        body, media_type = chunks, CONTENT_TYPES[speech.response_format]
    headers = _audio_headers(first, request_id)
    headers["Cache-Control"] = "no-cache"
    return AudioStreamResponse(body, handle=handle, media_type=media_type, headers=headers, on_done=done)


def _observe_queue_waits(metrics: ServingMetrics, runtime: Any, handle: Any, model: str) -> None:
    """Queue wait before the first step, per batching stage, from the timings the stages sent along."""
    metrics.streams.observe_queue_waits(model, getattr(handle, "queue_waits", None), getattr(runtime, "topology", None), getattr(handle, "instances", ()))


async def _encoded(
    first: PcmAudio, rest: AsyncIterator[PcmAudio], speech: SpeechRequest, count: Callable[[PcmAudio], PcmAudio]
) -> AsyncIterator[bytes]:
    encoder = StreamEncoder(speech.response_format, first.sample_rate, first.channels)
    out = encoder.feed(first)
    if out:
        yield out
    async for part in rest:
        out = encoder.feed(count(part))
        if out:
            yield out
    out = encoder.finish()
    if out:
        yield out


async def _sse(chunks: AsyncIterator[bytes], speech: SpeechRequest, words: WordLog | None = None) -> AsyncIterator[bytes]:
    """OpenAI's event stream; a failure mid-way is reported as an ``error`` event before the stream ends.

    With ``timestamps: "word"`` a ``speech.audio.words`` event follows the audio its words are in."""
    sent = 0
    try:
        async for chunk in chunks:
            sent += len(chunk)
            yield _event({"type": "speech.audio.delta", "audio": base64.b64encode(chunk).decode("ascii")})
            if words is not None and (new := words.take_new()):
                yield _event({"type": "speech.audio.words", "words": new})
        if words is not None and (new := words.take_new()):
            yield _event({"type": "speech.audio.words", "words": new})
    except (RequestFailed, AudioError) as exc:
        yield _event({"type": "error", "error": {"message": str(exc), "type": "server_error", "param": None, "code": getattr(exc, "kind", "invalid_stage_output")}})
        raise
    tokens = len(speech.text)
    usage = {"input_tokens": tokens, "output_tokens": sent, "total_tokens": tokens + sent}
    yield _event({"type": "speech.audio.done", "usage": usage})


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


async def guarded(awaitable: Any) -> Any:
    """Map runtime and audio failures of one request to API errors."""
    try:
        return await awaitable
    except asyncio.CancelledError:
        raise
    except RequestFailed as exc:
        kind = getattr(exc, "kind", "stage_error")
        if kind == "cancelled":
            raise Disconnected() from None
        if kind == "invalid_request":
            raise APIError(400, exc.message, param=getattr(exc, "param", None), code="invalid_value") from None
        raise runtime_error(exc) from None
    except AudioError as exc:
        raise APIError(500, f"the pipeline produced invalid audio: {exc}", type="server_error", code="invalid_stage_output") from None
    except StopAsyncIteration:
        raise APIError(500, "the pipeline finished without producing audio", type="server_error", code="invalid_stage_output") from None
    except ClientGone:
        raise Disconnected() from None


async def read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The whole body, at most ``limit`` bytes, within ``timeout`` seconds (a trickling client is cut off)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    chunks: list[bytes] = []
    size = 0

    async def collect() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(size, limit)
            chunks.append(chunk)

    try:
        await asyncio.wait_for(collect(), timeout)
    except asyncio.TimeoutError:
        raise APIError(
            408,
            f"the request body did not arrive within {timeout:g} s ({size} bytes received); send it at once",
            code="request_timeout",
            headers={"Connection": "close"},
        ) from None
    except ClientDisconnect:
        client = request.client
        log.info("client %s disconnected after %d bytes of the request body", f"{client.host}:{client.port}" if client else "?", size)
        raise Disconnected() from None
    return b"".join(chunks)


def _too_large(size: int, limit: int) -> APIError:
    return APIError(
        413,
        f"request body is {size}+ bytes; the limit is {limit} bytes (--max-body-bytes). Send shorter input",
        code="request_too_large",
        headers={"Connection": "close"},
    )


def _audio_headers(audio: PcmAudio, request_id: str) -> dict[str, str]:
    headers = {"X-Audio-Sample-Rate": str(audio.sample_rate), "X-Audio-Channels": str(audio.channels)}
    if request_id:
        headers["X-Request-Id"] = request_id
    return headers


def log_access(request: Request, status: int, started: float, error: str | None = None) -> None:
    """One line per speech request: status, seconds, model, input characters, audio seconds."""
    seconds = time.perf_counter() - started
    state = request.state
    model, chars, audio = getattr(state, "model", None), getattr(state, "chars", None), getattr(state, "audio_s", None)
    access_log.info(
        "POST %s %d %.3fs model=%s chars=%s audio_s=%s%s",
        SPEECH, status, seconds, model or "-", chars if chars is not None else "-", f"{audio:.2f}" if audio is not None else "-",
        f" error={error}" if error else "",
        extra={"status": status, "seconds": round(seconds, 4), "model": model, "chars": chars, "audio_s": audio, "request_id": getattr(state, "request_id", None)},
    )
