"""The worker: build this process instance's stages, report ready, serve until told to stop.

:class:`Worker` composes its parts, each an object with its own narrow
interface: a :class:`~.requests.WorkerRequests` table (requests in flight
here, abort, deadline), a :class:`~.forward.Forwarder` (outputs, chunks and
control messages out), a :class:`~.runner.StageRunner` (starts and runs
stages; the forwarder's local delivery) and an
:class:`~.dispatch.InboxDispatcher` (messages in). The plane comes from the
:class:`~.host.WorkerHost` the entry point was given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections import OrderedDict
from typing import Any

from omni_compiler.topology import CompiledTopology, ProcessInstance

from .. import envelope as E
from ..routing import Router
from .build import BuiltStages, StageBuildError, build_stages
from .dispatch import InboxDispatcher
from .facts import append_facts, stage_facts
from .forward import Forwarder
from .host import WorkerHost
from .options import WorkerOptions
from .requests import WorkerRequests
from .runner import StageRunner

log = logging.getLogger("omni.worker")

TERM_EARLY = threading.Event()
"""Set by the entry point's handler when SIGTERM came before the event loop could take it."""


class Worker:
    """One process instance's stages and the requests in flight through them."""

    def __init__(
        self, topology: CompiledTopology, instance: ProcessInstance, run: dict[str, Any], options: WorkerOptions, host: WorkerHost | None = None
    ) -> None:
        self.topology = topology
        self.instance = instance
        self.name = instance.name
        self.run_spec = run
        self.options = options
        self.host = host or WorkerHost()
        self.router = Router(topology)
        self.stages = BuiltStages()
        self.plane: Any = None
        self.requests: WorkerRequests | None = None
        self.forwarder: Forwarder | None = None

    @property
    def finished(self) -> OrderedDict[str, None]:
        """Ids of requests that finished here recently (their late messages are dropped)."""
        return self.requests.finished if self.requests is not None else OrderedDict()

    async def run(self) -> None:
        """Build, report ready (or the startup traceback), serve until SHUTDOWN."""
        loop = asyncio.get_running_loop()
        self.plane = self.host.open_plane(self.run_spec, self.name, self.options)
        to_parent = self.plane.outbox(E.PARENT)
        self.requests = WorkerRequests(loop)
        try:
            with self._sigterm_reported(loop):  # from the start: a SIGTERM while building or right after ready is reported too
                try:
                    self.stages = build_stages(self.topology, self.instance, self.options, self.router, self.run_spec)
                except StageBuildError as exc:
                    if exc.config is not None:  # the user's value, not a fault: the parent reports it once, without a traceback
                        log.debug("failed to start (stage %s): %s", exc.stage, exc.config.summary())
                        report: Any = {"config": exc.config.to_dict()}
                    else:
                        log.error("failed to start (stage %s):\n%s", exc.stage or "-", exc.tb.rstrip())
                        report = exc.tb
                    await to_parent.send(E.header(E.STARTUP_ERROR, stage=exc.stage or "", src=self.name, has_data=True), report)
                    return
                local = {p.stage: p for p in self.instance.stages}
                self.forwarder = forwarder = Forwarder(self.name, self.router, local, self.stages.route_fns, self.plane, loop)
                runner = StageRunner(self.instance, self.router, self.stages, self.requests, forwarder)
                forwarder.delivery = runner
                dispatcher = InboxDispatcher(self.plane, self.requests, runner)
                endpoint = self.plane.endpoint() if hasattr(self.plane, "endpoint") else None  # where peers on other nodes reach us
                objects = {name: adapter.obj for name, adapter in self.stages.adapters.items()}
                ready = {"endpoint": endpoint, **stage_facts(self.topology, self.instance, objects), **append_facts(self.stages.adapters)}
                await to_parent.send(E.header(E.READY, src=self.name, has_data=True), ready)
                beating = loop.create_task(self._heartbeat(forwarder)) if self.options.heartbeat_interval > 0 else None
                try:
                    await dispatcher.serve()
                finally:
                    if beating is not None:
                        beating.cancel()
                    self.requests.abort_all()
                    self.stages.shutdown()
        finally:
            self.plane.close()

    async def _heartbeat(self, forwarder: Forwarder) -> None:
        """Tell the parent, every ``heartbeat_interval``, that this event loop still turns.

        A worker that stops (SIGSTOP, a stage that blocks the loop, a deadlock
        under the GIL) stops beating; the parent kills and restarts it under its
        policy instead of letting its requests wait out their deadlines.
        """
        control = forwarder.control
        while True:
            await asyncio.sleep(self.options.heartbeat_interval)
            # control sends this process could not make since the last beat (a credit to a peer that is
            # gone, ...) ride along, so the parent counts them in /metrics; an undelivered beat keeps them
            failures = control.take_unreported()
            header = E.header(E.HEARTBEAT, src=self.name, has_data=bool(failures))
            if not await control.send(E.PARENT, header, failures or None) and failures:
                control.unreported_again(failures)

    @contextlib.contextmanager
    def _sigterm_reported(self, loop: asyncio.AbstractEventLoop):
        """SIGTERM is reported to the parent, which decides: drain with everyone, or restart this one.

        systemd and ``docker stop`` signal every process of the service at
        once; a worker that died on its own SIGTERM would fail requests the
        parent is still draining.
        """
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        loop.add_signal_handler(signal.SIGTERM, self._on_sigterm, loop)
        if TERM_EARLY.is_set():
            self._on_sigterm(loop)
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    def _on_sigterm(self, loop: asyncio.AbstractEventLoop) -> None:
        log.warning("received SIGTERM; telling the parent (it drains with the server, or restarts this process)")
        loop.create_task(self._report_term())

    async def _report_term(self) -> None:
        with contextlib.suppress(Exception):  # the parent is gone: nobody to tell
            await self.plane.outbox(E.PARENT).send(E.header(E.TERM, src=self.name), timeout=5.0)
