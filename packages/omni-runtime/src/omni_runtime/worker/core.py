"""The worker: build this process instance's stages, report ready, serve until told to stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections import OrderedDict

from omni_compiler.topology import CompiledTopology, ProcessInstance

from .. import envelope as E
from ..routing import Router
from .build import BuiltStages, StageBuildError, build_stages
from .execution import Execution
from .inbound import Inbound
from .options import WorkerOptions
from .outbound import Outbound

log = logging.getLogger("omni.worker")

TERM_EARLY = threading.Event()
"""Set by the entry point's handler when SIGTERM came before the event loop could take it."""


class Worker(Inbound, Execution, Outbound):
    """One process instance's stages and the requests in flight through them."""

    def __init__(self, topology: CompiledTopology, instance: ProcessInstance, run: dict[str, str], options: WorkerOptions) -> None:
        self.topology = topology
        self.instance = instance
        self.name = instance.name
        self.run_spec = run
        self.options = options
        self.router = Router(topology)
        self.local = {p.stage: p for p in instance.stages}
        self.stages = BuiltStages()
        self.requests = {}
        self.finished = OrderedDict()

    async def run(self) -> None:
        """Build, report ready (or the startup traceback), serve until SHUTDOWN."""
        from ..plane import Plane
        from ..transport import RunDir

        self.loop = asyncio.get_running_loop()
        run = RunDir.from_dict(self.run_spec)
        if "node" in self.run_spec:  # placed on a node of a cluster: IPC on this node, TCP to the others
            from ..raycluster.dataplane import NodePlane

            self.plane = NodePlane(run, self.name, self.run_spec["node"], self.run_spec.get("peers"), self.options.shm_budget_bytes)
        else:
            self.plane = Plane(run, self.name, self.options.shm_budget_bytes)
        self.to_parent = self.plane.outbox(E.PARENT)
        try:
            with self._sigterm_reported():  # from the start: a SIGTERM while building or right after ready is reported too
                try:
                    self.stages = build_stages(self.topology, self.instance, self.options, self.router, self.run_spec)
                except StageBuildError as exc:
                    log.error("failed to start (stage %s):\n%s", exc.stage or "-", exc.tb.rstrip())
                    await self.to_parent.send(E.header(E.STARTUP_ERROR, stage=exc.stage or "", src=self.name, has_data=True), exc.tb)
                    return
                endpoint = self.plane.endpoint() if hasattr(self.plane, "endpoint") else None  # where peers on other nodes reach us
                await self.to_parent.send(E.header(E.READY, src=self.name, has_data=endpoint is not None), endpoint)
                try:
                    await self._serve()
                finally:
                    for req in list(self.requests.values()):
                        self._abort(req)
                    self.stages.shutdown()
        finally:
            self.plane.close()

    @contextlib.contextmanager
    def _sigterm_reported(self):
        """SIGTERM is reported to the parent, which decides: drain with everyone, or restart this one.

        systemd and ``docker stop`` signal every process of the service at
        once; a worker that died on its own SIGTERM would fail requests the
        parent is still draining.
        """
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        self.loop.add_signal_handler(signal.SIGTERM, self._on_sigterm)
        if TERM_EARLY.is_set():
            self._on_sigterm()
        try:
            yield
        finally:
            self.loop.remove_signal_handler(signal.SIGTERM)

    def _on_sigterm(self) -> None:
        log.warning("received SIGTERM; telling the parent (it drains with the server, or restarts this process)")
        self.loop.create_task(self._send_quietly(E.PARENT, E.header(E.TERM, src=self.name)))
