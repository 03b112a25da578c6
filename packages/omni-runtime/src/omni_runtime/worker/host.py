"""Where a worker runs, as the one entry point (:func:`~.entry.run_worker`) needs to know it.

A local worker is a fresh OS process: it owns its signals, it watches its
parent, and its plane is this host's (IPC sockets and shared memory in the
run directory). A backend that hosts workers elsewhere (an actor on a
cluster node) passes its own :class:`WorkerHost` to the same entry point,
adjusting only the placement (its devices) and the plane (its transports);
everything else (logging options, stage building, serving) is the same code.
"""

from __future__ import annotations

from typing import Any

from omni_compiler.topology import CompiledTopology, ProcessInstance

from .options import WorkerOptions


class WorkerHost:
    """This host, a process of its own: the default."""

    owns_process = True
    """True when the worker is its process's main program (signals, parent-death watch are its to set)."""

    def place(self, topology: CompiledTopology, instance: ProcessInstance, options: WorkerOptions) -> tuple[CompiledTopology, ProcessInstance]:
        """The topology and instance as this host runs them (a cluster maps logical GPU ids here)."""
        return topology, instance

    def open_plane(self, run: dict[str, Any], name: str, options: WorkerOptions) -> Any:
        """This worker's end of the data plane."""
        from ..plane import Plane
        from ..transport import RunDir

        return Plane(RunDir.from_dict(run), name, options.shm_budget_bytes, publish=True)  # its byte counts, for /metrics

    def serving(self, worker: Any) -> None:
        """Called with the worker before it starts (a host that answers questions about it keeps it)."""
