"""OpenAI-compatible HTTP serving for a running omni Runtime.

``create_app(runtime, settings)`` builds the FastAPI app; ``serve_runtime``
runs it under uvicorn on the runtime's event loop. ``omni serve`` wires the
two to a compiled topology.
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
