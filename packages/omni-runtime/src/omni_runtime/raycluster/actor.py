"""The Ray actor that hosts one process instance: the same worker code as a spawned process.

The parent creates one actor per instance (``omni:<run id>:<instance>``) and
makes one long call, :meth:`WorkerActor.serve`, that runs the worker until it
is told to stop: stages built in declaration order, ready or the startup
traceback reported to the parent over omni's own sockets, the same stage
contract. The call's result is how the parent learns the actor ended; an actor
or node that dies fails it at once (Ray's ``ActorDiedError``).

Differences from a spawned process, all of them placement:

* no parent-death signal: Ray ends an actor when its owner (the driver) dies;
* the GPU ids of the config are logical, mapped onto the devices Ray assigned
  (:func:`~.placement.logical_gpu_map`);
* the worker learns its node (id and address) so its data plane uses IPC and
  shared memory towards processes of its node and TCP towards the others.

Every argument is a JSON string or a list of strings: nothing user-defined is
pickled, and no payload goes through Ray's object store.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from omni_compiler.topology import CompiledTopology, ProcessInstance

from ..worker.host import WorkerHost
from ..worker.options import WorkerOptions


class WorkerActor:
    """Run as a threaded Ray actor, so :meth:`node` and :meth:`transport_bytes` answer while :meth:`serve` runs."""

    def __init__(self) -> None:
        self._worker: Any = None
        self._gpu_map: dict[int, int] = {}

    def node(self) -> dict[str, Any]:
        """Where Ray placed this actor: node id and address, process id, the GPUs it was given."""
        import ray

        ctx = ray.get_runtime_context()
        return {
            "node_id": ctx.get_node_id(),
            "host": ray.util.get_node_ip_address(),
            "pid": os.getpid(),
            "gpus": [str(g) for g in ctx.get_accelerator_ids().get("GPU", [])],
            "gpu_map": {str(k): v for k, v in self._gpu_map.items()},
        }

    def free_port(self) -> int:
        """A port free on this actor's node: where rank 0 of a TP group hosts the group's rendezvous."""
        from ..distributed import pick_port

        return pick_port(self.node()["host"])

    def serve(self, launch_json: str, tp_port: int | None = None) -> int:
        """Build and serve the instance until SHUTDOWN through the worker's one entry point; returns 0 then.

        ``tp_port``: for a TP rank, the port rank 0's actor picked on its node, where the group
        meets (the group is packed on rank 0's node, so this node's address is rank 0's)."""
        from ..worker.entry import run_worker

        launch = json.loads(launch_json)
        tp = launch["run"].get("tp")
        if tp is not None:
            tp.update(host=self.node()["host"], port=tp_port if tp_port is not None else tp["port"])
            launch_json = json.dumps(launch)
        try:
            return run_worker(launch_json, host=ActorHost(self))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()

    def transport_bytes(self) -> dict[str, dict[str, int]]:
        """Bytes this instance sent, per peer and transport (``ipc``, ``shm``, ``tcp``)."""
        plane = getattr(self._worker, "plane", None)
        return plane.sent_bytes() if plane is not None else {}


class ActorHost(WorkerHost):
    """A worker inside a Ray actor: a thread of the actor's process, on whichever node Ray chose."""

    owns_process = False

    def __init__(self, actor: WorkerActor) -> None:
        self.actor = actor
        self.info: dict[str, Any] = {}

    def place(self, topology: CompiledTopology, instance: ProcessInstance, options: WorkerOptions) -> tuple[CompiledTopology, ProcessInstance]:
        from .placement import logical_gpu_map, remap_gpus

        self.info = self.actor.node()
        if options.device == "cpu":
            return topology, instance
        self.actor._gpu_map = logical_gpu_map(instance.gpus, self.info["gpus"])
        topology = remap_gpus(topology, instance.name, self.actor._gpu_map)
        return topology, next(i for i in topology.instances if i.name == instance.name)

    def open_plane(self, run: dict[str, Any], name: str, options: WorkerOptions) -> Any:
        """IPC and shared memory towards processes of this node, TCP towards the others."""
        from ..transport import RunDir
        from .dataplane import NodePlane

        os.makedirs(run["path"], mode=0o700, exist_ok=True)  # the run's IPC directory, on this node too
        node = {"id": self.info["node_id"], "host": self.info["host"]}
        return NodePlane(RunDir.from_dict(run), name, node, run.get("peers"), options.shm_budget_bytes)

    def serving(self, worker: Any) -> None:
        self.actor._worker = worker
