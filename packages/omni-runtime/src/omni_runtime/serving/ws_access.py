"""Who may open ``/v1/audio/speech/stream``: the API key and the browser origin, checked as for HTTP.

Browsers cannot set ``Authorization`` on a WebSocket, so the key may also come as the
subprotocol ``omni.api-key.<key>`` (offered beside ``omni.v1``, which the server accepts).
A page may open the socket from the server's own origin or an ``--allowed-origins`` one;
clients that send no ``Origin`` (not browsers) pass the origin check.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from starlette.websockets import WebSocket

SUBPROTOCOL = "omni.v1"
KEY_PROTOCOL_PREFIX = "omni.api-key."


def authorised(ws: WebSocket, api_key: str | None) -> tuple[bool, str | None]:
    """Whether the socket carries the key (header, or the ``omni.api-key.<key>`` subprotocol), and the subprotocol to accept."""
    offered = list(ws.scope.get("subprotocols") or [])
    chosen = SUBPROTOCOL if SUBPROTOCOL in offered else None
    if api_key is None:
        return True, chosen
    expected = f"Bearer {api_key}".encode()
    if hmac.compare_digest(ws.headers.get("authorization", "").encode(), expected):
        return True, chosen
    for proto in offered:
        if proto.startswith(KEY_PROTOCOL_PREFIX) and hmac.compare_digest(proto[len(KEY_PROTOCOL_PREFIX):].encode(), api_key.encode()):
            return True, chosen
    return False, chosen


def origin_allowed(ws: WebSocket, allowed: tuple[str, ...]) -> bool:
    """Browsers send ``Origin``: the page's own origin and the ``--allowed-origins`` pass; clients without one do too."""
    origin = ws.headers.get("origin")
    if origin is None or "*" in allowed or origin.rstrip("/") in allowed:
        return True
    return urlsplit(origin).netloc.lower() == ws.headers.get("host", "").lower()
