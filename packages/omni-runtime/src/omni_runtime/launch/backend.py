"""The seam between the parent and the way worker processes are started and reached.

A :class:`Backend` owns both halves of "where do the workers run": it opens
the parent's end of the data plane for a run (:meth:`Backend.open`), starts
one worker for a :class:`WorkerLaunch` and hands back a
:class:`LaunchedWorker` whose ``exited`` future resolves (with an
:class:`ExitInfo`) when that worker is gone, and hears each worker's ready
event with the endpoint it listens on (:meth:`Backend.ready`). The supervisor
above it decides what to start, when to restart and what a death means; the
parent's parts send and receive over the plane the backend opened. :mod:`.local`
spawns OS processes on this host and uses IPC and shared memory; a cluster
backend plugs in here (see :mod:`.registry`) without the parent changing.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .spec import ExitInfo, WorkerLaunch

ControlSend = Callable[[str, dict[str, Any], Any, float], Awaitable[bool]]
"""The parent's control send: ``(peer, header, data, timeout) -> sent``."""


async def all_exited(exits: list[asyncio.Future], timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for every given exit future; True when all are done."""
    if not exits:
        return True
    _done, not_done = await asyncio.wait(exits, timeout=max(timeout, 0.0))
    return not not_done


class LaunchedWorker(ABC):
    """One started worker as its backend sees it."""

    instance: str
    pid: int | None
    """OS pid where the backend knows one on this host (for operators, tests and the run guard)."""
    exited: asyncio.Future[ExitInfo]
    """Resolves once the worker is gone (set on the event loop the backend was started on)."""

    @abstractmethod
    def kill(self) -> None:
        """End the worker now (SIGKILL or the backend's equivalent); ``exited`` resolves afterwards."""

    def kill_now_sync(self) -> None:
        """Last-resort kill from interpreter exit, without an event loop; default: :meth:`kill`."""
        self.kill()


@dataclass(frozen=True)
class RunSetup:
    """What a backend needs to open a run: the topology, the workers' options and the parent's bounds."""

    topology: Any
    """The :class:`~omni_compiler.topology.CompiledTopology` being run."""
    options: Any
    """The workers' :class:`~omni_runtime.worker.WorkerOptions`."""
    startup_timeout: float
    send_timeout: float | None
    arrays: str = "torch"
    """What the parent decodes result tensors into: ``"torch"`` or ``"numpy"`` (``Runtime(arrays=...)``)."""


class Backend(ABC):
    """Opens a run's data plane and starts its workers; one backend per runtime.

    The default :meth:`open` is this host's plane (IPC sockets and shared
    memory in the run directory); a backend that spans hosts overrides it,
    :meth:`ready` (to learn where each worker listens) and the views.
    """

    name: str = "?"

    async def open(self, run: Any, setup: RunSetup) -> Any:
        """Bind the parent's end of the data plane for ``run`` (nothing is started yet); returns the plane."""
        from ..envelope import PARENT
        from ..plane import Plane

        self._local_counts = (run, Plane(run, PARENT, setup.options.shm_budget_bytes, arrays=setup.arrays), [inst.name for inst in setup.topology.instances])
        return self._local_counts[1]

    @abstractmethod
    async def launch(self, launch: WorkerLaunch) -> LaunchedWorker:
        """Start one worker (returns once it is started, not once it is ready)."""

    async def ready(self, instance: str, endpoint: Any, send: ControlSend) -> None:  # noqa: B027 - one host: nothing to learn
        """``instance`` reported ready, listening at ``endpoint`` (None on one host).

        ``send(peer, header, data, timeout)`` is the parent's control channel
        (a failed send is logged and counted there), for what the backend tells
        its workers (the peer list).
        """

    async def close(self) -> None:  # noqa: B027 - most backends hold nothing to release
        """Release what the backend holds once every worker has exited."""

    # -- views for operators (``/metrics``, ``omni topology``) ------------------
    @property
    def run_id(self) -> str | None:
        """An id of the run in the backend's own naming, where it has one."""
        return None

    async def placements(self, pids: dict[str, int | None]) -> dict[str, dict[str, Any]]:
        """Where each live instance runs (default: this host, by pid)."""
        return {name: {"node_id": "local", "host": "127.0.0.1", "pid": pid} for name, pid in pids.items()}

    async def transport_bytes(self) -> dict[str, dict[str, dict[str, int]]]:
        """Bytes each process sent to each peer, per transport (``ipc``, ``shm``).

        This host's plane: the parent's own counts, and what each worker published in the run
        directory (at most :data:`~omni_runtime.plane.PUBLISH_EVERY_S` old)."""
        opened = getattr(self, "_local_counts", None)
        if opened is None:
            return {}
        from ..envelope import PARENT
        from ..plane import read_published

        run, plane, instances = opened
        sent = read_published(run, instances)
        own = plane.sent_bytes()
        if own:
            sent[PARENT] = own
        return sent

    def edge_transports(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The transport of each (sender, receiver) pair (default: ``ipc``, one host)."""
        return dict.fromkeys(pairs, "ipc")
