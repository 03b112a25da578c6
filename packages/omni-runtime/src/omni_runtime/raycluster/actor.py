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

import asyncio
import json
import os
import sys
from typing import Any


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

    def serve(
        self, topology_json: str, instance_name: str, run_json: str, options_json: str, sys_path: list[str],
        tp: dict[str, Any] | None = None, tp_port: int | None = None,
    ) -> int:
        """Build and serve the instance until SHUTDOWN; returns 0 then (a startup failure was reported already).

        ``tp``: this TP rank's rendezvous, met on its own node (the group is packed on rank 0's)
        at ``tp_port``, the port rank 0's actor picked there."""
        from omni_compiler.topology import CompiledTopology

        from ..worker import Worker, WorkerOptions
        from .placement import logical_gpu_map, remap_gpus

        for entry in reversed(sys_path):  # the driver's import path, where it exists on this node
            if entry not in sys.path and os.path.isdir(entry):
                sys.path.insert(0, entry)
        info = self.node()
        topology = CompiledTopology.from_json(topology_json)
        options = WorkerOptions.from_json(options_json)
        instance = next(i for i in topology.instances if i.name == instance_name)
        if options.device != "cpu":
            self._gpu_map = logical_gpu_map(instance.gpus, info["gpus"])
            topology = remap_gpus(topology, instance_name, self._gpu_map)
            instance = next(i for i in topology.instances if i.name == instance_name)
        run = json.loads(run_json)
        os.makedirs(run["path"], mode=0o700, exist_ok=True)  # the run's IPC directory, on this node too
        run["node"] = {"id": info["node_id"], "host": info["host"]}
        if tp is not None:
            run["tp"] = {**tp, "host": info["host"], "port": tp_port if tp_port is not None else tp["port"]}
        for placement in instance.stages:
            os.environ.update(topology.stage(placement.stage).env)
        self._worker = Worker(topology, instance, run, options)
        try:
            asyncio.run(self._worker.run())
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        return 0

    def transport_bytes(self) -> dict[str, dict[str, int]]:
        """Bytes this instance sent, per peer and transport (``ipc``, ``shm``, ``tcp``)."""
        plane = getattr(self._worker, "plane", None)
        return plane.sent_bytes() if plane is not None else {}
