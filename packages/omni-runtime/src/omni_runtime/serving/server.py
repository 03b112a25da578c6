"""Run the app under uvicorn on the runtime's own event loop.

The runtime and the HTTP server share one asyncio loop, so request handlers
await runtime handles directly. The listening socket is bound before any
stage process starts: a taken port fails in milliseconds, not after model
loading. Shutdown order is fixed: stop accepting HTTP, then drain and stop the
runtime (which removes its IPC directory and shared memory).
"""

from __future__ import annotations

import contextlib
import errno
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn

from .app import ServingSettings, create_app

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    log_level: str = "info"
    shutdown_grace: float = 5.0
    """Seconds the runtime gets to drain in-flight requests before its processes are killed."""


class BindError(Exception):
    """The address cannot be listened on (a user-fixable problem: pick another port or host)."""

    exit_code = 1

    def __init__(self, host: str, port: int, reason: str):
        self.host, self.port, self.reason = host, port, reason
        fix = "pass a free port with --port N (or --port 0 for any free port)"
        if "assign" in reason or "resolve" in reason:
            fix = "pass an address of this machine with --host (127.0.0.1 for local only, 0.0.0.0 for all interfaces)"
        super().__init__(f"error: cannot listen on {host}:{port}: {reason}\n  fix:  {fix}")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket for uvicorn (IPv6 when ``host`` is an IPv6 address)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as exc:
        raise BindError(host, port, f"cannot resolve host: {exc.strerror}") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = "address already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        raise BindError(host, port, reason) from None
    sock.set_inheritable(False)
    return sock


def bound_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class _Server(uvicorn.Server):
    """uvicorn's server without its re-raise of SIGINT/SIGTERM after it stops.

    Stock uvicorn re-delivers the signal once it has stopped, which would kill
    this process before the runtime behind it shuts its workers down cleanly.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in _SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


async def serve_runtime(
    runtime: Any,
    settings: ServingSettings,
    options: ServeOptions,
    sock: socket.socket,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve ``runtime`` (already started) on ``sock`` until SIGINT/SIGTERM, then shut it down."""
    app = create_app(runtime, settings)
    config = uvicorn.Config(app, log_level=options.log_level, lifespan="off", access_log=False, timeout_graceful_shutdown=options.shutdown_grace)
    server = _Server(config)
    try:
        announce(f"omni: serving {', '.join(settings.models)} on {bound_url(sock)} (OpenAI API at /v1/audio/speech)")
        await server.serve(sockets=[sock])
    finally:
        sock.close()
        await runtime.shutdown(grace=options.shutdown_grace)
