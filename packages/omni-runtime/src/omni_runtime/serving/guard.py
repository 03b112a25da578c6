"""uvicorn's h11 protocol with the limits a public endpoint needs against hostile clients.

- **Header deadline**: a connection has ``header_timeout`` seconds to send a complete
  request head (request line and headers), on its first request and every later one;
  a slow-loris client is closed instead of holding a file descriptor.
- **Body deadline**: once its head is in, a request has ``body_timeout`` seconds to
  send its whole body. The app answers a body it is reading too slowly with a 408
  (:func:`.speech.read_body`); this deadline, a little later, also closes a connection
  whose body nobody reads any more (refused at the head with a 429, say) or whose
  app never answered.
- **Connection cap** below the process's file-descriptor limit: at the cap, a new
  connection evicts the oldest *idle* one (no request in progress, or a head still
  arriving), else the *slowest body* (the fewest body bytes per second) rather than being
  refused, so 1,000 idle or trickling connections cannot lock out ``/health`` or a real
  request, and ``accept()`` never meets EMFILE (which makes asyncio log a traceback per
  attempt). When every connection has a request in progress, the newcomer is closed at once.
- **431** for a request head over ``max_header_bytes`` (h11 would answer a bare 400).
- **Head arrival time**: each request's scope carries ``scope["extensions"][HEAD_AT]``, the
  ``time.perf_counter()`` at which the read completing its head came off the socket, so the
  admission gate can measure a refusal from there (queueing on a busy event loop included)
  instead of from when its task first ran.
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
BODY_GRACE_S = 1.0
"""The connection's body deadline runs this much past the app's, so the app's 408 goes out first."""
FD_RESERVE = 192
"""File descriptors kept free of HTTP connections: the runtime's sockets and shared memory, plus
one accept burst (:data:`ACCEPT_BURST`) and the evicted connections not yet closed."""
HEAD_AT = "omni.head_at"
"""Scope extension: ``time.perf_counter()`` when the data completing the request's head was received."""
ACCEPT_BURST = 64
"""Connections asyncio accepts per wake-up (the listen backlog it is given); bounded so a flood
cannot take more descriptors than the reserve before the cap is checked."""


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout: float = 10.0
    body_timeout: float = 10.0
    """Seconds a request has, after its head, to send its whole body."""
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
            self._body_bytes = 0
            self._body_started: float | None = None
            self._deadline: Any = None
            if len(self.connections) >= cap and not _evict(self.connections):
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
            received_at = time.perf_counter()
            cycle = self.cycle
            if self.conn.their_state is h11.IDLE:
                # h11 bounds only a head still incomplete: one that arrives whole is counted here
                end = data.find(b"\r\n\r\n")
                self._head_bytes += len(data) if end < 0 else end + 4
                if self._head_bytes > limits.max_header_bytes:
                    _send_status(self, 431, f"request headers exceed {limits.max_header_bytes} bytes")
                    return
            in_body = self._body_started is not None
            super().data_received(data)
            if self.transport.get_protocol() is not self:
                # upgraded to a WebSocket: its protocol owns the connection from now on (h11 still sees the
                # upgrade request's body as pending, and a body deadline would close the socket mid-session)
                self._disarm_deadline()
                return
            if self.cycle is not None and self.cycle is not cycle:  # a head completed: its app task has not run yet
                self.cycle.scope.setdefault("extensions", {})[HEAD_AT] = received_at
            state = self.conn.their_state
            if state is h11.SEND_BODY:
                if in_body:
                    self._body_bytes += len(data)
                else:  # the head just completed: the body's clock starts
                    self._head_bytes = 0
                    self._body_started = time.monotonic()
                    self._arm_deadline(limits.body_timeout + BODY_GRACE_S)
            else:
                self._body_started = None  # the body is complete (or was discarded after an early answer)
                if state is not h11.IDLE:
                    self._head_bytes = 0
                    self._disarm_deadline()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self._body_started is None:
                self._arm_deadline()  # the next request's head gets the same deadline (keep-alive)
            # a body still arriving after an early answer (429, 401, 404) keeps its body deadline

        def send_400_response(self, msg: str) -> None:
            if self._head_bytes > limits.max_header_bytes or len(self.conn.trailing_data[0]) > limits.max_header_bytes:
                _send_status(self, 431, f"request headers exceed {limits.max_header_bytes} bytes")
                return
            super().send_400_response(msg)

        def idle(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def body_rate(self) -> float | None:
            """Body bytes per second of a request whose body is still arriving (None: not in a body)."""
            if self._body_started is None or self.conn.their_state is not h11.SEND_BODY:
                return None
            return self._body_bytes / max(time.monotonic() - self._body_started, 1e-3)

        def _arm_deadline(self, seconds: float | None = None) -> None:
            self._disarm_deadline()
            self._deadline = self.loop.call_later(limits.header_timeout if seconds is None else seconds, self._too_slow)

        def _disarm_deadline(self) -> None:
            if getattr(self, "_deadline", None) is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            """The head or the body did not arrive in time: close (an app still reading the body has answered 408)."""
            self._deadline = None
            if self.transport is not None and not self.transport.is_closing() and self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
                self.transport.close()

    return GuardedH11Protocol


def _evict(connections: set[Any]) -> bool:
    """Close the oldest idle connection, else the slowest body; False when every connection has a request in progress."""
    open_ = [c for c in connections if c.transport is not None and not c.transport.is_closing()]
    idle = [c for c in open_ if getattr(c, "idle", lambda: False)()]
    if idle:
        victim = min(idle, key=lambda c: c._opened)
    else:
        trickling = [(rate, c._opened, c) for c in open_ for rate in [getattr(c, "body_rate", lambda: None)()] if rate is not None]
        if not trickling:
            return False
        victim = min(trickling, key=lambda t: (t[0], t[1]))[2]
    victim.transport.abort()
    connections.discard(victim)
    return True


def _send_status(protocol: Any, status: int, message: str) -> None:
    body = json.dumps(error_body(message, type="invalid_request_error", code="request_header_fields_too_large")).encode()
    head = (
        f"HTTP/1.1 {status} Request Header Fields Too Large\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode("ascii")
    protocol.transport.write(head + body)
    protocol.transport.close()
