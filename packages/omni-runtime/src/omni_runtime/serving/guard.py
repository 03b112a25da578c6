"""uvicorn's h11 protocol with the limits a public endpoint needs against hostile clients.

- **Header deadline**: a connection has ``header_timeout`` seconds to send a complete
  request head (request line and headers), on its first request and every later one;
  a slow-loris client is closed instead of holding a file descriptor.
- **Connection cap** below the process's file-descriptor limit: at the cap, a new
  connection evicts the oldest *idle* one (no request in progress) rather than being
  refused, so 1,000 idle connections cannot lock out ``/health`` or a real request, and
  ``accept()`` never meets EMFILE (which makes asyncio log a traceback per attempt).
  When every connection is busy, the newcomer is closed at once.
- **431** for a request head over ``max_header_bytes`` (h11 would answer a bare 400).

Body read timeouts are enforced by the app (:func:`.speech.read_body`), which knows
when it is reading a body.
"""

from __future__ import annotations

import json
import logging
import resource
import time
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .errors import error_body

log = logging.getLogger("omni.serving")
FD_RESERVE = 192
"""File descriptors kept free of HTTP connections: the runtime's sockets and shared memory, plus
one accept burst (:data:`ACCEPT_BURST`) and the evicted connections not yet closed."""
ACCEPT_BURST = 64
"""Connections asyncio accepts per wake-up (the listen backlog it is given); bounded so a flood
cannot take more descriptors than the reserve before the cap is checked."""


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout: float = 10.0
    max_header_bytes: int = 16 * 1024
    max_connections: int | None = None
    """None: the fd limit less :data:`FD_RESERVE` (at least 16)."""

    def connection_cap(self) -> int:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        by_fds = max(16, soft - max(FD_RESERVE, soft // 4)) if soft != resource.RLIM_INFINITY else 65536
        return min(self.max_connections, by_fds) if self.max_connections else by_fds


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """An H11Protocol subclass bound to ``limits`` (uvicorn instantiates the class it is given)."""
    cap = limits.connection_cap()

    class GuardedH11Protocol(H11Protocol):
        connection_limits = limits
        max_connections = cap

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            self._opened = time.monotonic()
            self._head_bytes = 0
            self._deadline: Any = None
            if len(self.connections) >= cap and not _evict_idle(self.connections):
                transport.abort()  # every connection is mid-request: refuse the newcomer
                return
            super().connection_made(transport)
            self._arm_deadline()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_deadline()
            if self.transport is None:
                return  # refused in connection_made: uvicorn never saw it
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self.conn.their_state is h11.IDLE:
                # h11 bounds only a head still incomplete: one that arrives whole is counted here
                end = data.find(b"\r\n\r\n")
                self._head_bytes += len(data) if end < 0 else end + 4
                if self._head_bytes > limits.max_header_bytes:
                    _send_status(self, 431, f"request headers exceed {limits.max_header_bytes} bytes")
                    return
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._head_bytes = 0
                self._disarm_deadline()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_deadline()  # the next request's head gets the same deadline (keep-alive)

        def send_400_response(self, msg: str) -> None:
            if self._head_bytes > limits.max_header_bytes or len(self.conn.trailing_data[0]) > limits.max_header_bytes:
                _send_status(self, 431, f"request headers exceed {limits.max_header_bytes} bytes")
                return
            super().send_400_response(msg)

        def idle(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm_deadline(self) -> None:
            self._disarm_deadline()
            self._deadline = self.loop.call_later(limits.header_timeout, self._head_too_slow)

        def _disarm_deadline(self) -> None:
            if getattr(self, "_deadline", None) is not None:
                self._deadline.cancel()
                self._deadline = None

        def _head_too_slow(self) -> None:
            self._deadline = None
            if self.transport is not None and not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self.transport.close()

    return GuardedH11Protocol


def _evict_idle(connections: set[Any]) -> bool:
    idle = [c for c in connections if getattr(c, "idle", lambda: False)() and not c.transport.is_closing()]
    if not idle:
        return False
    oldest = min(idle, key=lambda c: c._opened)
    oldest.transport.abort()
    connections.discard(oldest)
    return True


def _send_status(protocol: Any, status: int, message: str) -> None:
    body = json.dumps(error_body(message, type="invalid_request_error", code="request_header_fields_too_large")).encode()
    head = (
        f"HTTP/1.1 {status} Request Header Fields Too Large\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode("ascii")
    protocol.transport.write(head + body)
    protocol.transport.close()
