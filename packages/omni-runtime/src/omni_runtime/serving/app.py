"""The FastAPI app: an OpenAI-compatible speech endpoint in front of a Runtime, and the topology page.

The app never starts or stops the runtime (the caller owns its lifetime, see
:mod:`.server`), so tests and embedders can mount it on any runtime object
that offers ``submit``, ``health`` and ``queue_depths``; it answers from the
moment the port is open, reporting ``starting`` until the runtime is ready.
"""

from __future__ import annotations

import hmac
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.middleware.cors import CORSMiddleware

from .errors import APIError, error_body, install_handlers
from .metrics import NO_MODEL, ServingMetrics
from .page import health_status, page_html, topology_state
from .request import SpeechLimits
from .speech import SPEECH, Disconnected, client_request_id, handle_speech, log_access
from .voice_agent import install_voice_agent_routes
from .voices import served_voices
from .voices_api import VoiceResolver

_SPEECH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["input"],
    "properties": {
        "model": {"type": "string", "description": "a served model id (GET /v1/models); default: the first one"},
        "input": {"type": "string", "minLength": 1, "description": "the text to speak (4096 characters by default)"},
        "voice": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"id": {"type": "string"}}}]},
        "response_format": {"type": "string", "enum": ["mp3", "opus", "aac", "flac", "wav", "pcm"], "default": "mp3"},
        "speed": {"type": "number", "minimum": 0.25, "maximum": 4.0, "default": 1.0},
        "stream_format": {"type": "string", "enum": ["audio", "sse"], "description": "stream raw audio or server-sent events"},
        "stream": {"type": "boolean", "default": False, "description": "omni's alias of stream_format=audio"},
        "instructions": {"type": "string", "description": "a style prompt, for models that take one (others ignore it)"},
        "seed": {"type": "integer", "minimum": 0},
        "max_new_tokens": {"type": "integer", "minimum": 1, "maximum": 1000000},
        "ref_audio": {"type": "string", "description": "base64 audio (any format ffmpeg reads) of a voice to clone (models that clone voices)"},
    },
    "additionalProperties": True,
}


@dataclass(frozen=True)
class ServingSettings:
    """What the server exposes; ``models[0]`` answers requests that name no model."""

    models: tuple[str, ...]
    limits: SpeechLimits = field(default_factory=SpeechLimits)
    created: int = field(default_factory=lambda: int(time.time()))
    voices: tuple[str, ...] = ()
    """Preset voices to list; empty: the ones the workers reported at ready (``Runtime.voices()``)."""
    api_key: str | None = None
    """When set, every ``/v1`` route needs ``Authorization: Bearer <api_key>``."""
    allowed_origins: tuple[str, ...] = ()
    body_timeout: float = 10.0
    """Seconds a client has to send a whole request body."""
    build: dict[str, str] = field(default_factory=dict)
    voices_dir: str | None = None
    """Where uploaded voices and their speaker artefacts live (survive restarts); None: a temporary directory."""

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("ServingSettings.models needs at least one model id")


def create_app(runtime: Any, settings: ServingSettings) -> FastAPI:
    """Build the app for ``runtime`` (started, or being started)."""
    # no /docs or /redoc: FastAPI's pages load Swagger/ReDoc from a CDN, which a server on a closed network
    # cannot reach and an operator should not have to trust; /openapi.json stays for generators and editors
    app = FastAPI(title="omni", summary="OpenAI-compatible text-to-speech over an omni process topology", docs_url=None, redoc_url=None)
    pids = getattr(runtime, "instance_pids", dict)
    metrics = ServingMetrics(runtime.queue_depths, runtime.health, pids, settings.build, getattr(runtime, "supervision", None))
    app.state.runtime, app.state.settings, app.state.metrics = runtime, settings, metrics
    install_handlers(app)
    _install_middleware(app, settings)
    app.state.voices = VoiceResolver(runtime, settings, metrics.registry)
    install_voice_agent_routes(app)

    @app.post(SPEECH, openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": _SPEECH_SCHEMA}}}})
    async def speech(request: Request) -> Response:
        """Synthesize ``input``; the body is read and validated here so errors carry OpenAI's ``param`` and ``code``."""
        started = time.perf_counter()
        try:
            response = await handle_speech(request, runtime, settings, metrics, started)
        except APIError as exc:
            metrics.observe_request(SPEECH, exc.status, time.perf_counter() - started, _model_of(request))
            log_access(request, exc.status, started, error=exc.code or exc.type)
            return exc.response()
        except Disconnected:
            metrics.observe_request(SPEECH, 499, time.perf_counter() - started, _model_of(request))
            log_access(request, 499, started, error="client_gone")
            return Response(status_code=499)
        if response.status_code != 200 or not hasattr(response, "body_iterator"):
            metrics.observe_request(SPEECH, response.status_code, time.perf_counter() - started, _model_of(request))
            log_access(request, response.status_code, started)
        return response

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        metrics.count("/v1/models", 200)
        return JSONResponse({"object": "list", "data": [_model_card(m, settings) for m in settings.models]})

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str) -> JSONResponse:
        if model_id not in settings.models:
            metrics.count("/v1/models/{model}", 404)
            raise APIError(404, f"The model {model_id!r} does not exist", param="model", code="model_not_found")
        metrics.count("/v1/models/{model}", 200, model_id)
        return JSONResponse(_model_card(model_id, settings))

    @app.get("/v1/audio/voices")
    async def voices(model: str | None = None) -> JSONResponse:
        metrics.count("/v1/audio/voices", 200)
        return JSONResponse(app.state.voices.listing(served_voices(runtime, settings), model))

    @app.get("/v1/topology")
    async def topology() -> JSONResponse:
        metrics.count("/v1/topology", 200)
        return JSONResponse(topology_state(runtime))

    @app.get("/health")
    async def health() -> JSONResponse:
        state = runtime.health()
        status = health_status(state)
        code = 200 if status in ("ok", "ready", "degraded") else 503
        metrics.count("/health", code)
        return JSONResponse({**state, "status": status, "processes": dict(state.get("processes") or {})}, status_code=code)

    @app.get("/metrics")
    async def prometheus() -> Response:
        metrics.count("/metrics", 200)
        await metrics.refresh_transport(runtime)
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    @app.get("/", include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(page_html(runtime, settings))

    return app


def _install_middleware(app: FastAPI, settings: ServingSettings) -> None:
    app.add_middleware(_RequestIdAndAuth, api_key=settings.api_key, metrics=app.state.metrics)
    if settings.allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.allowed_origins),
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "X-Request-Id"],
            expose_headers=["X-Request-Id", "X-Audio-Sample-Rate", "X-Audio-Channels"],
        )


class _RequestIdAndAuth:
    """Plain ASGI middleware (streamed responses pass through untouched, disconnects included).

    Echoes the client's ``X-Request-Id`` (or a new one) on every response, and with an API
    key answers 401 in OpenAI's envelope to any ``/v1`` request without ``Bearer <key>``.
    """

    def __init__(self, app: Any, api_key: str | None, metrics: ServingMetrics) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode() if api_key else None
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        request_id = client_request_id(request) or uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        path, root = scope.get("path", ""), scope.get("root_path", "")
        if root and path.startswith(root):  # uvicorn's --root-path prefixes the path it hands over
            path = path[len(root):]
        if self.expected is not None and path.startswith("/v1/") and scope.get("method") != "OPTIONS":
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, self.expected):
                self.metrics.count(SPEECH if path == SPEECH else "/v1/*", 401)
                response = JSONResponse(
                    error_body(
                        "missing or wrong API key: send 'Authorization: Bearer <key>' with the key the server was started with",
                        type="invalid_request_error",
                        code="invalid_api_key",
                    ),
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer", "X-Request-Id": request_id},
                )
                await response(scope, receive, send)
                return

        async def send_with_id(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"x-request-id" for name, _ in headers):
                    chosen = scope["state"].get("request_id", request_id)
                    headers.append((b"x-request-id", str(chosen).encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)


def _model_of(request: Request) -> str:
    return str(getattr(request.state, "model", NO_MODEL))


def _model_card(model_id: str, settings: ServingSettings) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": settings.created, "owned_by": "omni"}
