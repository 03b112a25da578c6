"""The parent's side of a run placed by Ray: the :class:`~omni_runtime.launch.Backend` for ``--backend ray``.

It owns the three things the parent asks a backend for: the parent's plane
(IPC on its node, TCP across), launching (one actor per instance, through
the launcher), and what to do when an instance reports ready with the
endpoint it listens on (tell every instance where every other one listens,
so each hop picks IPC + shared memory or TCP by node).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any

from omni_compiler.topology import CompiledTopology

from .. import envelope as E
from ..launch import Backend, ExitInfo, LaunchedWorker, RunSetup, WorkerLaunch
from ..launch.backend import ControlSend
from ..transport.tcp import IPC, TCP
from .dataplane import NodePlane
from .launcher import RayLauncher, RayWorker


class ClusterBackend(Backend):
    """``--backend ray``: one actor per instance, on any node that fits its request; IPC on a node, TCP across.

    ``ray_address``: the cluster to join, as ``ray.init`` takes it (``"auto"``
    included); without one a local Ray is started and stopped with the run.
    """

    name = "ray"

    def __init__(self, ray_address: str | None = None) -> None:
        self.address = ray_address
        self._run_id = uuid.uuid4().hex[:8]
        self.topology: CompiledTopology | None = None
        self.plane: NodePlane | None = None
        self.launcher: RayLauncher | None = None
        self.endpoints: dict[str, dict[str, Any]] = {}

    @property
    def run_id(self) -> str | None:
        """The id in every actor's name (``omni:<run id>:<instance>``)."""
        return self._run_id

    async def open(self, run: Any, setup: RunSetup) -> NodePlane:
        """Join the cluster, bind the parent's plane and prepare the launcher (nothing spawned yet)."""
        self.topology = setup.topology
        spec = run.to_dict()
        self.launcher = RayLauncher(setup.topology, "", setup.options, lambda _worker: None, self._run_id, self.address)
        try:
            node = await self.launcher.connect(setup.startup_timeout)
        except BaseException:
            self.launcher.close()  # placement groups made so far, and Ray itself when we started it
            raise
        options = setup.options
        self.plane = NodePlane(
            run, E.PARENT, node=node, shm_budget_bytes=options.shm_budget_bytes, send_timeout=setup.send_timeout, arrays=setup.arrays
        )
        self.endpoints[E.PARENT] = self.plane.endpoint()
        spec["peers"] = {E.PARENT: self.endpoints[E.PARENT]}
        self.launcher.run_json = json.dumps(spec)
        return self.plane

    async def launch(self, launch: WorkerLaunch) -> RayWorkerHandle:
        assert self.launcher is not None
        worker = await self.launcher.respawn_async(launch)
        return RayWorkerHandle(worker, asyncio.get_running_loop())

    async def ready(self, instance: str, endpoint: Any, send: ControlSend) -> None:
        """``instance`` listens at ``endpoint``; once every instance is known, tell all of them about all."""
        assert self.plane is not None and self.launcher is not None and self.topology is not None
        if isinstance(endpoint, dict):
            self.endpoints[instance] = endpoint
            self.plane.learn({instance: endpoint})
        if not all(i.name in self.endpoints for i in self.topology.instances):
            return
        book = dict(self.endpoints)
        for worker in self.launcher.alive():
            if worker.name in book:
                await send(worker.name, E.header(E.PEERS, has_data=True), book, 5.0)

    async def close(self) -> None:
        if self.launcher is None:
            return
        with contextlib.suppress(Exception):
            await self.launcher.kill_all()
        self.launcher.close()

    # -- views ---------------------------------------------------------------------------------
    async def placements(self, pids: dict[str, int | None]) -> dict[str, dict[str, Any]]:
        assert self.launcher is not None
        return await self.launcher.placements()

    async def transport_bytes(self) -> dict[str, dict[str, dict[str, int]]]:
        """Bytes sent per sender, peer and transport, the parent (``@parent``) included."""
        assert self.launcher is not None and self.plane is not None
        sent = await self.launcher.transport_bytes()
        sent[E.PARENT] = self.plane.sent_bytes()
        return sent

    def edge_transports(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """``ipc`` or ``tcp`` for every pair of processes that exchange messages (parent included)."""
        nodes = {name: str(ep.get("node")) for name, ep in self.endpoints.items()}
        out: dict[tuple[str, str], str] = {}
        for src, dst in pairs:
            if src in nodes and dst in nodes:
                out[(src, dst)] = IPC if nodes[src] == nodes[dst] else TCP
        return out


class RayWorkerHandle(LaunchedWorker):
    """One instance's actor behind the launcher seam: ``exited`` resolves when Ray reports it gone."""

    def __init__(self, worker: RayWorker, loop: asyncio.AbstractEventLoop) -> None:
        self.instance = worker.name
        self._worker = worker
        self.exited = loop.create_future()
        worker.exited.add_done_callback(self._ended)

    @property  # type: ignore[override]
    def pid(self) -> int | None:
        return self._worker.pid

    def _ended(self, fut: asyncio.Future[int]) -> None:
        if self.exited.done():
            return
        code = fut.result() if not fut.cancelled() else None
        # a stopped actor returns 0; a dead one is described by Ray in words (node removed, OOM, ...)
        self.exited.set_result(ExitInfo(0) if code == 0 else ExitInfo(None, self._worker.reason or "its Ray actor died"))

    def kill(self) -> None:
        import ray

        with contextlib.suppress(Exception):
            ray.kill(self._worker.actor, no_restart=True)
