"""Run the app under uvicorn on the runtime's own event loop.

The runtime and the HTTP server share one asyncio loop, so request handlers
await runtime handles directly. The listening socket is bound before any
stage process starts: a taken port fails in milliseconds, not after model
loading. Stopping (SIGTERM to this process or to its whole process group,
or Ctrl-C) drains: the runtime stops admitting (new requests get 503
``shutdown``), in-flight requests get ``shutdown_grace`` seconds to finish,
the rest fail with 503 ``shutdown`` in the JSON envelope, and only then does
the HTTP server close (a second signal stops at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn

from .app import ServingSettings, create_app

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
log = logging.getLogger("omni.serving")
_FLUSH_S = 5.0
"""After the drain: how long open connections get to receive their (503) responses."""


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    log_level: str = "info"
    shutdown_grace: float = 30.0
    """Seconds in-flight requests get to finish after SIGTERM or Ctrl-C; the rest fail with 503 ``shutdown``."""


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
    """uvicorn's server that drains the runtime before it stops, and does not re-raise the signal.

    Stock uvicorn stops accepting at once and, past its graceful timeout,
    answers what is still running with a plain-text 500; it also re-delivers
    the signal once stopped, which would kill this process before the runtime
    shut its workers down. Here the first signal drains the runtime (the app
    answers every request, late ones with 503 ``shutdown``) and then lets
    uvicorn stop; a second signal stops at once.
    """

    def __init__(self, config: uvicorn.Config, runtime: Any, grace: float) -> None:
        super().__init__(config)
        self._runtime = runtime
        self._grace = grace
        self._draining: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets=sockets)

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self._draining is not None or self._loop is None:
            super().handle_exit(sig, frame)  # second signal: stop now
            self.force_exit = True
            return
        self._loop.call_soon_threadsafe(self._start_drain, sig)

    def _start_drain(self, sig: int) -> None:
        if self._draining is not None:
            return
        log.info("received %s: draining (up to %g s), then stopping", signal.Signals(sig).name, self._grace)
        self._draining = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        try:
            await self._runtime.shutdown(grace=self._grace)
        finally:
            self.should_exit = True

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
    config = uvicorn.Config(app, log_level=options.log_level, lifespan="off", access_log=False, timeout_graceful_shutdown=_FLUSH_S, log_config=None)
    server = _Server(config, runtime, options.shutdown_grace)
    try:
        announce(f"omni: serving {', '.join(settings.models)} on {bound_url(sock)} (OpenAI API at /v1/audio/speech)")
        await server.serve(sockets=[sock])
    finally:
        sock.close()
        await runtime.shutdown(grace=options.shutdown_grace)
