"""The FastAPI app: an OpenAI-compatible speech endpoint in front of a running Runtime.

The app never starts or stops the runtime (the caller owns its lifetime, see
:mod:`.server`), so tests and embedders can mount it on any runtime object
that offers ``submit``, ``health`` and ``queue_depths``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from ..errors import RequestFailed, RuntimeFailure
from .audio import CONTENT_TYPES, AudioError, PcmAudio, encode, wav_header
from .errors import RETRY_AFTER_S, APIError, install_handlers, runtime_error
from .metrics import ServingMetrics
from .request import SpeechLimits, parse_body, parse_speech
from .streaming import AudioStreamResponse, ClientGone, until_disconnect
from .synthesis import audio_parts, collect_audio

SPEECH = "/v1/audio/speech"
access_log = logging.getLogger("omni.access")
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
    metrics = ServingMetrics(runtime.queue_depths, runtime.health, getattr(runtime, "supervision", None))
    app.state.runtime = runtime
    app.state.settings = settings
    app.state.metrics = metrics
    install_handlers(app)

    @app.post(SPEECH, openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": _SPEECH_SCHEMA}}}})
    async def speech(request: Request) -> Response:
        """Synthesize ``input``; the body is validated by hand so errors carry OpenAI's ``param`` and ``code``."""
        started = time.perf_counter()
        info: dict[str, Any] = {}
        try:
            response = await _speech(request, runtime, settings, metrics, started, info)
        except APIError as exc:
            metrics.observe_request(SPEECH, exc.status, time.perf_counter() - started)
            _log_access(exc.status, started, info, error=exc.code or exc.type)
            return exc.response()
        except _Disconnected:
            metrics.observe_request(SPEECH, 499, time.perf_counter() - started)
            _log_access(499, started, info, error="client_gone")
            return Response(status_code=499)
        if not isinstance(response, AudioStreamResponse):
            metrics.observe_request(SPEECH, response.status_code, time.perf_counter() - started)
            _log_access(response.status_code, started, info)
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
        """``starting`` (503), ``ready`` (200), ``degraded`` (200: an instance is down, the others serve), ``unhealthy`` (503)."""
        state = runtime.health()
        status_word = state.get("status") or ("ready" if state.get("healthy") else "unhealthy")
        status = 200 if status_word in ("ready", "degraded") else 503
        _count(metrics, "/health", status)
        headers = {"Retry-After": RETRY_AFTER_S} if status == 503 else None
        return JSONResponse({"status": status_word, "processes": dict(state.get("processes") or {})}, status_code=status, headers=headers)

    @app.get("/metrics")
    async def prometheus() -> Response:
        _count(metrics, "/metrics", 200)
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    return app


class _Disconnected(Exception):
    """The client went away before a response could start."""


async def _speech(request: Request, runtime: Any, settings: ServingSettings, metrics: ServingMetrics, started: float, info: dict[str, Any]) -> Response:
    raw = await _read_body(request, settings.limits.max_body_bytes)
    speech = parse_speech(parse_body(raw), settings.models, settings.limits)
    info.update(model=speech.model, chars=len(speech.text))
    try:
        handle = await runtime.submit(speech.entry_data())
    except RequestFailed as exc:
        raise runtime_error(exc) from None
    except RuntimeFailure as exc:
        code = "shutdown" if getattr(runtime, "draining", False) else "unavailable"
        raise APIError(503, f"the runtime is not accepting requests: {exc}", type="server_error", code=code, headers={"Retry-After": RETRY_AFTER_S}) from None

    metrics.in_flight.inc()
    handed_over = False  # once the stream response exists, it owns in_flight and the metrics
    try:
        if not speech.stream:
            audio = await _guarded(until_disconnect(request, handle, collect_audio(handle)))
            metrics.observe_stages(getattr(handle, "stage_timings", None))
            body = encode(audio, speech.response_format)
            info["audio_s"] = audio.frames / audio.sample_rate
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
        _log_access(status, started, info, stream=True)
        if status == 200:
            metrics.observe_stages(getattr(handle, "stage_timings", None))

    metrics.first_audio.observe(time.perf_counter() - started)
    return AudioStreamResponse(
        _stream_bytes(first, parts, speech.response_format, info),
        handle=handle,
        media_type=CONTENT_TYPES[speech.response_format],
        headers=_audio_headers(first, handle),
        on_done=done,
    )


async def _first(parts: AsyncIterator[PcmAudio]) -> PcmAudio:
    return await parts.__anext__()


async def _stream_bytes(first: PcmAudio, rest: AsyncIterator[PcmAudio], fmt: str, info: dict[str, Any]) -> AsyncIterator[bytes]:
    info["audio_s"] = first.frames / first.sample_rate
    if fmt == "wav":
        yield wav_header(first.sample_rate, first.channels) + first.to_bytes()
    else:
        yield first.to_bytes()
    async for part in rest:
        if part.sample_rate != first.sample_rate or part.channels != first.channels:
            raise AudioError("streamed audio chunks changed sample rate or channel count mid-stream")
        info["audio_s"] += part.frames / part.sample_rate
        yield part.to_bytes()


async def _guarded(awaitable: Any) -> Any:
    """Map runtime and audio failures of one request to API errors."""
    try:
        return await awaitable
    except asyncio.CancelledError:
        raise
    except RequestFailed as exc:
        if getattr(exc, "kind", "stage_error") == "cancelled":
            raise _Disconnected() from None
        raise runtime_error(exc) from None
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


def _log_access(status: int, started: float, info: dict[str, Any], error: str | None = None, stream: bool = False) -> None:
    """One line per speech request: status, seconds, model, input characters, audio seconds."""
    seconds = time.perf_counter() - started
    audio = info.get("audio_s")
    access_log.info(
        "POST %s %d %.3fs model=%s chars=%s audio_s=%s%s%s",
        SPEECH, status, seconds, info.get("model", "-"), info.get("chars", "-"), f"{audio:.2f}" if audio is not None else "-",
        " stream" if stream else "", f" error={error}" if error else "",
        extra={"status": status, "seconds": round(seconds, 4), "model": info.get("model"), "chars": info.get("chars"), "audio_s": audio},
    )


def _model_card(model_id: str, settings: ServingSettings) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": settings.created, "owned_by": "omni"}


def _count(metrics: ServingMetrics, endpoint: str, status: int) -> None:
    metrics.requests.labels(endpoint=endpoint, status=str(status)).inc()

