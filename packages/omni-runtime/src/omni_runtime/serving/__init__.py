"""OpenAI-compatible HTTP serving for an omni Runtime, and the topology page.

``create_app(runtime, settings)`` builds the FastAPI app; ``serve_runtime``
runs it under uvicorn on the runtime's event loop, the port open before the
runtime is ready. ``omni serve`` wires the two to a compiled topology
(127.0.0.1:8000 by default). Endpoints, errors, operator flags and every
metric are documented in the package README ("Serving"). Modules: ``request``
(the pydantic request model, strict JSON), ``speech`` (the endpoint),
``encoders`` (PyAV containers), ``guard`` (connection limits), ``metrics``,
``page`` (``/`` and ``/v1/topology``), ``voices`` (what the server reads from
the pipeline before it starts). Voice agents (docs/voice-agents.md): ``ws_stream``
(the WebSocket) with ``segmenter``, ``ws_access`` and ``resampling``, ``voices_api`` and ``voice_store`` (uploaded
voices), ``batch``, wired by ``voice_agent``.
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
