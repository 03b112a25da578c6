"""The voice-agent surface in one call: the voices API, the WebSocket stream and the batch endpoint."""

from __future__ import annotations

from typing import Any

from .batch import install_batch_route
from .voices_api import install_voice_routes
from .ws_stream import install_stream_route


def install_voice_agent_routes(app: Any) -> None:
    """Needs ``app.state.voices`` (a :class:`~.voices_api.VoiceResolver`) and ``app.state.metrics``."""
    install_voice_routes(app, app.state.voices, app.state.metrics)
    install_stream_route(app)
    install_batch_route(app)
