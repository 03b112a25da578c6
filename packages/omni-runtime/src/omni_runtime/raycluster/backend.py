"""The parent's side of a run placed by Ray: launcher, node-aware plane, peer book.

:class:`~omni_runtime.parent.runtime.Runtime` holds one of these for
``backend="ray"`` and asks it for three things: the parent's plane (IPC on
its node, TCP across), the launcher (one actor per instance), and what to do
when an instance reports ready with the endpoint it listens on (tell every
instance where every other one listens, so each hop picks IPC + shared memory
or TCP by node).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable
from typing import Any

from omni_compiler.topology import CompiledTopology

from .. import envelope as E
from ..launch import Backend, ExitInfo, LaunchedWorker, WorkerLaunch
from ..transport.tcp import IPC, TCP
from .dataplane import NodePlane
from .launcher import RayLauncher, RayWorker


class RayBackend:
    def __init__(self, topology: CompiledTopology, options: Any, on_exit: Callable[[Any], None], address: str | None, send_timeout: float | None) -> None:
        self.topology = topology
        self.options = options
        self.on_exit = on_exit
        self.address = address
        self.send_timeout = send_timeout
        self.run_id = uuid.uuid4().hex[:8]
        self.plane: NodePlane | None = None
        self.launcher: RayLauncher | None = None
        self.endpoints: dict[str, dict[str, Any]] = {}

    async def open(self, run: Any, timeout: float) -> tuple[NodePlane, RayLauncher]:
        """Join the cluster, bind the parent's plane and prepare the launcher (nothing spawned yet)."""
        spec = run.to_dict()
        self.launcher = RayLauncher(self.topology, "", self.options, self.on_exit, self.run_id, self.address)
        try:
            node = await self.launcher.connect(timeout)
        except BaseException:
            self.launcher.close()  # placement groups made so far, and Ray itself when we started it
            raise
        self.plane = NodePlane(run, E.PARENT, node=node, shm_budget_bytes=self.options.shm_budget_bytes, send_timeout=self.send_timeout)
        self.endpoints[E.PARENT] = self.plane.endpoint()
        spec["peers"] = {E.PARENT: self.endpoints[E.PARENT]}
        self.launcher.run_json = json.dumps(spec)
        return self.plane, self.launcher

    async def ready(self, name: str, endpoint: Any) -> None:
        """An instance listens at ``endpoint``; once every instance is known, tell all of them about all."""
        assert self.plane is not None and self.launcher is not None
        if isinstance(endpoint, dict):
            self.endpoints[name] = endpoint
            self.plane.learn({name: endpoint})
        if not all(i.name in self.endpoints for i in self.topology.instances):
            return
        book = dict(self.endpoints)
        for worker in self.launcher.alive():
            if worker.name in book:
                with contextlib.suppress(Exception):
                    await self.plane.outbox(worker.name).send(E.header(E.PEERS, has_data=True), book, timeout=5.0)

    # -- views ---------------------------------------------------------------------------------
    async def placements(self) -> dict[str, dict[str, Any]]:
        assert self.launcher is not None
        return await self.launcher.placements()

    async def transport_bytes(self) -> dict[str, dict[str, dict[str, int]]]:
        """Bytes sent per sender, peer and transport, the parent (``@parent``) included."""
        assert self.launcher is not None and self.plane is not None
        sent = await self.launcher.transport_bytes()
        sent[E.PARENT] = self.plane.sent_bytes()
        return sent

    def edge_transports(self) -> dict[tuple[str, str], str]:
        """``ipc`` or ``tcp`` for every pair of processes that exchange messages (parent included)."""
        nodes = {name: str(ep.get("node")) for name, ep in self.endpoints.items()}
        out: dict[tuple[str, str], str] = {}
        for src, dst in instance_pairs(self.topology):
            if src in nodes and dst in nodes:
                out[(src, dst)] = IPC if nodes[src] == nodes[dst] else TCP
        return out


def instance_pairs(topology: CompiledTopology) -> list[tuple[str, str]]:
    """Ordered (sender, receiver) process pairs of a run: stage edges across processes, plus the parent's."""
    hosts: dict[str, list[str]] = {}
    for instance in topology.instances:
        for placement in instance.stages:
            hosts.setdefault(placement.stage, []).append(instance.name)
    pairs: dict[tuple[str, str], None] = {}
    for name in hosts.get(topology.entry_stage, []):
        pairs[(E.PARENT, name)] = None
    for edge in topology.edges:
        for src in hosts.get(edge.src, []):
            for dst in hosts.get(edge.dst, []):
                if src != dst:
                    pairs[(src, dst)] = None
    for stage in topology.stages:
        if stage.terminal:
            for name in hosts.get(stage.name, []):
                pairs[(name, E.PARENT)] = None
    return list(pairs)


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


class RayLaunchBackend(Backend):
    """The supervisor's backend for ``backend="ray"``: one actor per launch, on any node that fits its request."""

    name = "ray"

    def __init__(self, launcher: RayLauncher) -> None:
        self.launcher = launcher

    async def launch(self, launch: WorkerLaunch) -> RayWorkerHandle:
        worker = await self.launcher.respawn_async(launch.instance)
        return RayWorkerHandle(worker, asyncio.get_running_loop())

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.launcher.kill_all()
        self.launcher.close()
