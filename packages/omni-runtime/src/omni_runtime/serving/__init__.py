"""OpenAI-compatible HTTP serving for a running omni Runtime.

``create_app(runtime, settings)`` builds the FastAPI app; ``serve_runtime``
runs it under uvicorn on the runtime's event loop. ``omni serve`` wires the
two to a compiled topology (127.0.0.1:8000 by default; ``--port 0`` picks a
free port and the ``omni: serving ... on http://HOST:PORT`` line says which).

Endpoints
---------
``POST /v1/audio/speech``  body (JSON, at most 64 KiB): ``input`` (required,
    1..4096 characters, ``--max-input-chars``), ``model`` (a served id; default
    the first), ``voice`` (string or ``{"id": ...}``), ``response_format``
    ``wav`` (default) | ``pcm`` (s16le) | ``flac``, ``speed`` 0.25..4.0,
    ``stream`` (bool: chunks are sent as the terminal stage emits them; ``wav``
    then starts with a header whose sizes are 0xFFFFFFFF, ``pcm`` is raw;
    ``flac`` cannot stream), ``stream_format`` ``audio`` only, ``instructions``.
    Other fields reach the entry stage in ``StagePayload.data``. Response
    headers ``X-Audio-Sample-Rate``, ``X-Audio-Channels``, ``X-Request-Id``.
    A client that disconnects cancels the request in every stage.
``GET /v1/models``, ``GET /v1/models/{id}``  the served model ids.
``GET /health``  200 ``{"status": "ok", "processes": {...}}`` when every process
    instance is ready, else 503 ``"unhealthy"`` (a dead worker, startup, drain).
``GET /metrics``  Prometheus text: ``omni_requests_total{endpoint,status}``,
    ``omni_request_latency_seconds{endpoint}``, ``omni_time_to_first_audio_seconds``,
    ``omni_stage_latency_seconds{stage}``, ``omni_requests_in_flight``,
    ``omni_queue_depth{process}``, ``omni_process_state{process,state}``,
    ``omni_runtime_healthy``.

Errors use OpenAI's envelope ``{"error": {"message", "type", "param", "code"}}``:
400 bad input (``empty_input``, ``string_above_max_length``,
``unsupported_response_format``, ``invalid_value``, ``invalid_json`` ...), 404
``model_not_found``, 413 ``request_too_large``, 500 a stage failed (the message
is ``stage <name> (process <process>): <Type>: <message>``), 503 the runtime
cannot take the request (dead process, shutting down). Official OpenAI clients
raise the matching typed exceptions.
"""

from .app import ServingSettings, create_app
from .audio import AUDIO_FORMATS, PcmAudio, encode, to_pcm16, wav_header
from .errors import APIError
from .request import SpeechLimits, SpeechRequest
from .server import BindError, ServeOptions, bind, serve_runtime

__all__ = [
    "AUDIO_FORMATS",
    "APIError",
    "BindError",
    "PcmAudio",
    "ServeOptions",
    "ServingSettings",
    "SpeechLimits",
    "SpeechRequest",
    "bind",
    "create_app",
    "encode",
    "serve_runtime",
    "to_pcm16",
    "wav_header",
]
