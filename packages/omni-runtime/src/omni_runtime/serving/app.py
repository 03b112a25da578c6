"""The FastAPI app: an OpenAI-compatible speech endpoint in front of a running Runtime.

The app never starts or stops the runtime (the caller owns its lifetime, see
:mod:`.server`), so tests and embedders can mount it on any runtime object
that offers ``submit``, ``health`` and ``queue_depths``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from ..errors import RequestFailed, RuntimeFailure
from .audio import CONTENT_TYPES, AudioError, PcmAudio, encode, wav_header
from .errors import APIError, install_handlers
from .metrics import ServingMetrics
from .request import SpeechLimits, parse_body, parse_speech
from .streaming import AudioStreamResponse, ClientGone, until_disconnect
from .synthesis import audio_parts, collect_audio

SPEECH = "/v1/audio/speech"
_SPEECH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["input"],
    "properties": {
        "model": {"type": "string", "description": "a served model id (GET /v1/models); default: the first one"},
        "input": {"type": "string", "minLength": 1, "description": "the text to speak (bounded, 4096 characters by default)"},
        "voice": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"id": {"type": "string"}}}]},
        "response_format": {"type": "string", "enum": ["wav", "pcm", "flac"], "default": "wav"},
        "speed": {"type": "number", "minimum": 0.25, "maximum": 4.0, "default": 1.0},
        "stream": {"type": "boolean", "default": False, "description": "send audio chunks as they are produced (wav, pcm)"},
        "stream_format": {"type": "string", "enum": ["audio"]},
        "instructions": {"type": "string"},
    },
    "additionalProperties": True,
}


@dataclass(frozen=True)
class ServingSettings:
    """What the server exposes; ``models[0]`` answers requests that name no model."""

    models: tuple[str, ...]
    limits: SpeechLimits = field(default_factory=SpeechLimits)
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("ServingSettings.models needs at least one model id")


def create_app(runtime: Any, settings: ServingSettings) -> FastAPI:
    """Build the app for an already started ``runtime``."""
    app = FastAPI(title="omni", summary="OpenAI-compatible text-to-speech over an omni process topology")
    metrics = ServingMetrics(runtime.queue_depths, runtime.health)
    app.state.runtime = runtime
    app.state.settings = settings
    app.state.metrics = metrics
    install_handlers(app)

    @app.post(SPEECH, openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": _SPEECH_SCHEMA}}}})
    async def speech(request: Request) -> Response:
        """Synthesize ``input``; the body is validated by hand so errors carry OpenAI's ``param`` and ``code``."""
        started = time.perf_counter()
        try:
            response = await _speech(request, runtime, settings, metrics, started)
        except APIError as exc:
            metrics.observe_request(SPEECH, exc.status, time.perf_counter() - started)
            return exc.response()
        except _Disconnected:
            metrics.observe_request(SPEECH, 499, time.perf_counter() - started)
            return Response(status_code=499)
        if not isinstance(response, AudioStreamResponse):
            metrics.observe_request(SPEECH, response.status_code, time.perf_counter() - started)
        return response

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        _count(metrics, "/v1/models", 200)
        return JSONResponse({"object": "list", "data": [_model_card(m, settings) for m in settings.models]})

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str) -> JSONResponse:
        if model_id not in settings.models:
            _count(metrics, "/v1/models/{model}", 404)
            raise APIError(404, f"The model {model_id!r} does not exist", param="model", code="model_not_found")
        _count(metrics, "/v1/models/{model}", 200)
        return JSONResponse(_model_card(model_id, settings))

    @app.get("/health")
    async def health() -> JSONResponse:
        state = runtime.health()
        healthy = bool(state.get("healthy"))
        status = 200 if healthy else 503
        _count(metrics, "/health", status)
        return JSONResponse(
            {"status": "ok" if healthy else "unhealthy", "processes": dict(state.get("processes") or {})},
            status_code=status,
        )

    @app.get("/metrics")
    async def prometheus() -> Response:
        _count(metrics, "/metrics", 200)
        await metrics.refresh_transport(runtime)
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    return app


class _Disconnected(Exception):
    """The client went away before a response could start."""


async def _speech(request: Request, runtime: Any, settings: ServingSettings, metrics: ServingMetrics, started: float) -> Response:
    raw = await _read_body(request, settings.limits.max_body_bytes)
    speech = parse_speech(parse_body(raw), settings.models, settings.limits)
    try:
        handle = await runtime.submit(speech.entry_data())
    except RuntimeFailure as exc:
        raise APIError(503, f"the runtime is not accepting requests: {exc}", type="server_error", code="unavailable") from None

    metrics.in_flight.inc()
    handed_over = False  # once the stream response exists, it owns in_flight and the metrics
    try:
        if not speech.stream:
            audio = await _guarded(until_disconnect(request, handle, collect_audio(handle)))
            metrics.observe_stages(getattr(handle, "stage_timings", None))
            body = encode(audio, speech.response_format)
            return Response(body, media_type=CONTENT_TYPES[speech.response_format], headers=_audio_headers(audio, handle))
        parts = audio_parts(handle).__aiter__()
        first = await _guarded(until_disconnect(request, handle, _first(parts)))
        handed_over = True
    finally:
        if not handed_over:
            metrics.in_flight.dec()

    def done(status: int) -> None:
        metrics.in_flight.dec()
        metrics.observe_request(SPEECH, status, time.perf_counter() - started)
        if status == 200:
            metrics.observe_stages(getattr(handle, "stage_timings", None))

    metrics.first_audio.observe(time.perf_counter() - started)
    return AudioStreamResponse(
        _stream_bytes(first, parts, speech.response_format),
        handle=handle,
        media_type=CONTENT_TYPES[speech.response_format],
        headers=_audio_headers(first, handle),
        on_done=done,
    )


async def _first(parts: AsyncIterator[PcmAudio]) -> PcmAudio:
    return await parts.__anext__()


async def _stream_bytes(first: PcmAudio, rest: AsyncIterator[PcmAudio], fmt: str) -> AsyncIterator[bytes]:
    if fmt == "wav":
        yield wav_header(first.sample_rate, first.channels) + first.to_bytes()
    else:
        yield first.to_bytes()
    async for part in rest:
        if part.sample_rate != first.sample_rate or part.channels != first.channels:
            raise AudioError("streamed audio chunks changed sample rate or channel count mid-stream")
        yield part.to_bytes()


async def _guarded(awaitable: Any) -> Any:
    """Map runtime and audio failures of one request to API errors."""
    try:
        return await awaitable
    except asyncio.CancelledError:
        raise
    except RequestFailed as exc:
        kind = getattr(exc, "kind", "stage_error")
        if kind == "cancelled":
            raise _Disconnected() from None
        status = 503 if kind in ("shutdown", "unavailable", "process_died") else 500
        raise APIError(status, str(exc), type="server_error", code=kind) from None
    except AudioError as exc:
        raise APIError(500, f"the pipeline produced invalid audio: {exc}", type="server_error", code="invalid_stage_output") from None
    except StopAsyncIteration:
        raise APIError(500, "the pipeline finished without producing audio", type="server_error", code="invalid_stage_output") from None
    except ClientGone:
        raise _Disconnected() from None


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(size: int, limit: int) -> APIError:
    return APIError(
        413,
        f"request body is {size}+ bytes; the limit is {limit} bytes. Send shorter input",
        code="request_too_large",
    )


def _audio_headers(audio: PcmAudio, handle: Any) -> dict[str, str]:
    headers = {"X-Audio-Sample-Rate": str(audio.sample_rate), "X-Audio-Channels": str(audio.channels)}
    request_id = getattr(handle, "request_id", None)
    if isinstance(request_id, str):
        headers["X-Request-Id"] = request_id
    return headers


def _model_card(model_id: str, settings: ServingSettings) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": settings.created, "owned_by": "omni"}


def _count(metrics: ServingMetrics, endpoint: str, status: int) -> None:
    metrics.requests.labels(endpoint=endpoint, status=str(status)).inc()

