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
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from .app import ServingSettings, create_app
from .gate import DEFAULT_MAX_INFLIGHT, AdmissionGate
from .guard import ACCEPT_BURST, ConnectionLimits, guarded_protocol
from .speech import SPEECH

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
log = logging.getLogger("omni.serving")
LISTEN_BACKLOG = 2048
"""Connections the kernel queues before they are accepted. asyncio uses one number for the listen
backlog and the accepts per wake-up (:data:`.guard.ACCEPT_BURST`, kept small so the connection cap
is checked often); a 64-deep kernel queue dropped connection attempts in a burst, and each dropped
client waited a second for its retry (429s answered after 1-3 s at 10x overload)."""
_FLUSH_S = 5.0
"""After the drain: how long open connections get to receive their (503) responses."""


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    log_level: str = "info"
    shutdown_grace: float = 30.0
    """Seconds in-flight requests get to finish after SIGTERM or Ctrl-C; the rest fail with 503 ``shutdown``."""
    root_path: str = ""
    """The path prefix a reverse proxy serves this server under (uvicorn's root_path)."""
    keep_alive: float = 5.0
    """Seconds an idle keep-alive connection stays open."""
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)
    max_inflight: int | None = DEFAULT_MAX_INFLIGHT
    """Speech requests in flight at most, counted from their head (None: no bound); past it a 429 before the body is read."""


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
    if not 0 <= port <= 65535:
        raise BindError(host, port, "a TCP port is 0..65535")  # socket.bind would raise OverflowError
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as exc:
        raise BindError(host, port, f"cannot resolve host: {exc.strerror}") from None
    # proto IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on accepted sockets whose
    # proto says TCP; without it every keep-alive response waited ~40 ms for the client's delayed ACK
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
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

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        for sock in sockets or ():  # asyncio set the listen backlog to the accept burst: deepen the kernel's queue again
            with contextlib.suppress(OSError):
                sock.listen(LISTEN_BACKLOG)

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
            if self._runtime.health().get("status") != "starting":  # still starting: serve_runtime stops the start
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
    start_runtime: bool = False,
) -> None:
    """Serve ``runtime`` on ``sock`` until SIGINT/SIGTERM, then shut it down.

    With ``start_runtime`` the port answers first (``/health`` says ``starting``, 503)
    while the runtime builds its stages; a start-up failure stops the server and is raised.
    """
    app: Any = create_app(runtime, settings)
    if options.max_inflight is not None:
        app = AdmissionGate(app, path=SPEECH, limit=options.max_inflight, api_key=settings.api_key, metrics=app.state.metrics)
    config = uvicorn.Config(
        app,
        log_level=options.log_level,
        lifespan="off",
        access_log=False,
        timeout_graceful_shutdown=_FLUSH_S,
        log_config=None,
        http=guarded_protocol(options.connections),
        h11_max_incomplete_event_size=options.connections.max_header_bytes,
        timeout_keep_alive=max(1, round(options.keep_alive)),
        root_path=options.root_path,
        server_header=False,
        backlog=ACCEPT_BURST,
        ws_max_size=1024 * 1024,  # /v1/audio/speech/stream messages are small; larger frames close the socket (1009)
    )
    server = _Server(config, runtime, options.shutdown_grace)
    asyncio.get_running_loop().set_exception_handler(_AcceptErrors(asyncio.get_running_loop().get_exception_handler()))
    url = bound_url(sock)
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    lag = asyncio.ensure_future(watch_loop_lag(app_metrics(app)))
    try:
        if start_runtime:
            announce(f"omni: listening on {url} while the pipeline starts (GET /health answers 503 'starting' until it is ready)")
            await _start(runtime, serving, announce)
        announce(f"omni: serving {', '.join(settings.models)} on {url} (OpenAI API at /v1/audio/speech, topology page at /)")
        await serving
    finally:
        lag.cancel()
        if not serving.done():
            server.should_exit = True
            with contextlib.suppress(BaseException):
                await serving
        sock.close()
        await runtime.shutdown(grace=options.shutdown_grace)


LAG_PERIOD_S = 0.05
LAG_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


def app_metrics(app: Any) -> Any:
    """The ServingMetrics under the admission gate (or the bare app)."""
    inner = getattr(app, "app", app)
    return getattr(getattr(inner, "state", None), "metrics", None)


async def watch_loop_lag(metrics: Any) -> None:
    """``omni_event_loop_lag_seconds``: how late a timer due every 50 ms fires on the serving loop.

    Every request's head, 429, body and response is handled on this one loop; its lag
    is what a refused or admitted request waits before the server even looks at it
    (CPU starvation of the server process, or a handler that blocks the loop).
    """
    registry = getattr(metrics, "registry", None)
    if registry is None:
        return
    from prometheus_client import Histogram

    histogram = Histogram("omni_event_loop_lag_seconds", "How late a 50 ms timer fires on the serving event loop.",
                          buckets=LAG_BUCKETS, registry=registry)
    while True:
        due = time.perf_counter() + LAG_PERIOD_S
        await asyncio.sleep(LAG_PERIOD_S)
        histogram.observe(max(0.0, time.perf_counter() - due))


class _AcceptErrors:
    """One warning line (at most every 10 s) instead of asyncio's traceback per failed ``accept()``.

    The connection cap keeps HTTP connections below the descriptor limit, but the
    runtime's own sockets and shared memory, or another user of the process's
    descriptors, can still exhaust it; asyncio then pauses accepting for a second
    and logs a traceback for every attempt. Nothing in that traceback helps an
    operator; the line says what happened and what to do.
    """

    def __init__(self, previous: Any) -> None:
        self.previous = previous
        self.last = 0.0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM) and "accept" in context.get("message", ""):
            now = time.monotonic()
            if now - self.last >= 10.0:
                self.last = now
                log.warning("cannot accept connections: %s (open connections are near the file-descriptor limit); "
                            "retrying each second; raise the limit (ulimit -n) or lower --max-connections", exc.strerror)
            return
        if self.previous is not None:
            self.previous(loop, context)
        else:
            loop.default_exception_handler(context)


async def _start(runtime: Any, serving: asyncio.Future[Any], announce: Callable[[str], None]) -> None:
    """Start the runtime while uvicorn serves; report each process as it becomes ready."""
    starting = asyncio.ensure_future(runtime.start())
    watcher = asyncio.ensure_future(_report_progress(runtime, announce))
    try:
        done, _ = await asyncio.wait({starting, serving}, return_when=asyncio.FIRST_COMPLETED)
        if starting not in done:  # SIGINT/SIGTERM while starting: uvicorn stopped first
            starting.cancel()
            with contextlib.suppress(BaseException):
                await starting
            raise asyncio.CancelledError
        starting.result()
    finally:
        watcher.cancel()
        with contextlib.suppress(BaseException):
            await watcher


async def _report_progress(runtime: Any, announce: Callable[[str], None]) -> None:
    """One line per process instance as it turns ready (or dies) while the pipeline starts."""
    began = time.perf_counter()
    seen: dict[str, str] = {}
    stages = {inst.name: [p.stage for p in inst.stages] for inst in runtime.topology.instances}

    def report() -> None:
        for name, state in (runtime.health().get("processes") or {}).items():
            if seen.get(name) != state and state != "starting":
                announce(f"omni: process {name} {state} after {time.perf_counter() - began:.1f} s (stages: {', '.join(stages.get(name, []))})")
            seen[name] = state

    try:
        while True:
            report()
            await asyncio.sleep(0.1)
    finally:
        report()  # the last process's transition happens as start() returns
