"""The worker: build this process instance's stages, report ready, serve until told to stop."""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from omni_compiler.topology import CompiledTopology, ProcessInstance

from .. import envelope as E
from ..routing import Router
from .build import BuiltStages, StageBuildError, build_stages
from .execution import Execution
from .inbound import Inbound
from .options import WorkerOptions
from .outbound import Outbound


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
            try:
                self.stages = build_stages(self.topology, self.instance, self.options, self.router)
            except StageBuildError as exc:
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
