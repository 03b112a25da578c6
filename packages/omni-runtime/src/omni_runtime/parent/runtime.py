"""The parent side: start the run, admit requests, collect results, keep workers alive, stop.

The parent never imports a stage factory and is not on the stage-to-stage data
path: it sends the entry payload to the entry stage's process and receives the
terminal result (and streamed output chunks). Workers hand payloads to each
other directly. The parent alone owns the run (its IPC directory and every
shared-memory segment under its prefix): it creates it, removes it at the
end, and leaves a run guard behind that removes it if the parent is killed.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from omni_compiler.topology import CompiledTopology

from .. import envelope as E
from ..errors import RequestFailed, StartupError
from ..launch import Backend, LaunchedWorker, LocalBackend, WorkerLaunch
from ..routing import ReplicaChooser, Router
from ..supervision import READY, STARTING, Supervisor
from ..worker import WorkerOptions
from .admission import Admission
from .handle import Inflight
from .inbound import ParentInbound
from .sync import SyncRuntime

log = logging.getLogger("omni.runtime")

BACKENDS = ("local", "ray")

STATUS_STARTING = "starting"
STATUS_READY = "ready"
STATUS_DEGRADED = "degraded"
STATUS_UNHEALTHY = "unhealthy"


class Runtime(Admission, ParentInbound):
    """Run a compiled topology as real OS processes (see the package README)."""

    def __init__(
        self,
        topology: Any,
        *,
        device: str | None = None,
        startup_timeout: float = 120.0,
        replica_policy: str = "round_robin",
        model_path: str | None = None,
        enforce_memory_fraction: bool = False,
        log: Callable[[str], Any] | None = None,
        stage_threads: int = 64,
        shm_budget_bytes: int = 1 << 30,
        send_timeout: float = 30.0,
        request_timeout: float = 300.0,
        max_inflight: int | None = None,
        backend: str | Backend = "local",
        ray_address: str | None = None,
        log_level: str | None = None,
        log_format: str = "text",
    ) -> None:
        """``topology``: a :class:`CompiledTopology` or a ``PipelineConfig`` (compiled here, once).

        ``backend``: ``"local"`` spawns one OS process per instance on this machine;
        ``"ray"`` runs each instance as a Ray actor placed from ``processes.<P>.ray``
        (``ray_address`` as ``ray.init`` takes it, ``"auto"`` included; without one a
        local Ray is started and stopped with the runtime); or any
        :class:`~omni_runtime.launch.Backend`. ``log``: where the process table and the
        ready line go (default: the ``omni.runtime`` logger). ``log_level``/``log_format``:
        the workers' logging (default: this process's level, text).
        """
        if isinstance(backend, str) and backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if ray_address is not None and backend != "ray":
            raise ValueError("ray_address is only used with backend='ray'")
        if not isinstance(topology, CompiledTopology):
            from omni_compiler import compile as compile_topology

            topology = compile_topology(topology)
        self.topology = topology
        if device not in (None, "cpu") and not str(device).startswith("cuda"):
            raise ValueError(f"device must be None, 'cpu' or 'cuda', got {device!r}")
        if request_timeout <= 0:
            raise ValueError(f"request_timeout must be > 0 seconds, got {request_timeout}")
        if max_inflight is not None and max_inflight < 1:
            raise ValueError(f"max_inflight must be at least 1 (or None for no bound), got {max_inflight}")
        self.device = device
        self.startup_timeout = startup_timeout
        self.log = log or log_info
        self.router = Router(topology)
        self.chooser = ReplicaChooser(self.router, replica_policy)
        level = log_level or logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower()
        self.options = WorkerOptions(
            device=device,
            model_path=model_path,
            enforce_memory_fraction=enforce_memory_fraction,
            stage_threads=stage_threads,
            shm_budget_bytes=shm_budget_bytes,
            log_level=level if level in ("critical", "error", "warning", "info", "debug") else "info",
            log_format=log_format,
        )
        self.send_timeout = send_timeout
        self.request_timeout = request_timeout
        self.max_inflight = max_inflight
        self.backend_name = backend if isinstance(backend, str) else backend.name
        self.backend: Backend | None = backend if not isinstance(backend, str) else (LocalBackend() if backend == "local" else None)
        self.ray_address = ray_address
        self._ray: Any = None
        self.supervisor = None
        self.run: Any = None
        self._guard: Any = None
        self._plane = None
        self._recv_task: asyncio.Task[None] | None = None
        self._inflight: dict[str, Inflight] = {}
        self._load = {i.name: 0 for i in topology.instances}
        self._admitting = 0
        self._accepting = False
        self._started = False
        self._ready = False
        self._closed = False
        self._startup: asyncio.Future[None] | None = None
        self._shutting_down = False
        self._atexit: Callable[[], None] | None = None
        self._loop = None
        self._changed = asyncio.Event()

    # -- lifecycle -----------------------------------------------------------
    async def start(self) -> None:
        """Log the table, start one process per instance and wait until every stage is built.

        Raises :class:`StartupError` (stage, process, traceback) when a factory
        fails, a worker dies while starting, or ``startup_timeout`` passes; every
        started process is then stopped and the IPC directory removed.
        """
        if self._started:
            raise RuntimeError("Runtime.start() was already called")
        self._started = True
        from omni_compiler import render

        from ..plane import Plane
        from ..transport import RunDir
        from .run_guard import RunGuard

        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        if not logging.getLogger().handlers:  # nobody set up logging: the runtime's events still show
            from .. import logs

            logs.configure(self.options.log_level, self.options.log_format)
        self.log(render.table(self.topology))
        began = time.perf_counter()
        self.run = run = RunDir.create(base=os.environ.get("OMNI_RUNTIME_IPC_DIR"))
        self._guard = guard = RunGuard(run.path, run.shm_prefix)
        self._startup = self._loop.create_future()
        if self.backend_name == "local":
            ignored = sorted({p.declared_process for p in self.topology.processes if p.ray})
            if ignored:
                self.log(f"omni: processes.<P>.ray of {', '.join(ignored)} is ignored by the local backend (it places on Ray with --backend ray)")
        try:
            if self.backend_name == "ray" and self.backend is None:
                from ..raycluster.backend import RayBackend, RayLaunchBackend

                self._ray = RayBackend(self.topology, self.options, lambda _worker: None, self.ray_address, self.send_timeout)
                self._plane, launcher = await self._ray.open(run, self.startup_timeout)
                self.backend = RayLaunchBackend(launcher)
            else:
                self._plane = Plane(run, E.PARENT, self.options.shm_budget_bytes)
            assert self.backend is not None
            self.supervisor = supervisor = Supervisor(
                self.topology, self.backend, self._make_launch, self._on_death, self._notify_change, on_launched=self._on_launched
            )
            self._atexit = lambda: _emergency_cleanup(supervisor, run, guard)
            atexit.register(self._atexit)
            self._recv_task = self._loop.create_task(self._receive())
            await supervisor.start_all()
            try:
                await asyncio.wait_for(asyncio.shield(self._startup), self.startup_timeout)
            except asyncio.TimeoutError:
                waiting = [i.name for i in self.supervisor.instances.values() if i.state == STARTING]
                raise StartupError(
                    None,
                    ", ".join(waiting),
                    "",
                    reason=f"not ready after startup_timeout={self.startup_timeout:g} s (raise startup_timeout if loading is slow)",
                ) from None
        except BaseException:
            if not self._startup.done():
                self._startup.cancel()
            await self._teardown()
            raise
        for inst in self.topology.instances:
            self._plane.outbox(inst.name)
        self.supervisor.restarting_enabled = True
        self._accepting = True
        self._ready = True
        count = len(self.topology.instances)
        self.log(f"omni: {count} process{'es' if count != 1 else ''} ready in {time.perf_counter() - began:.1f} s")

    def _make_launch(self, instance: str, attempt: int) -> WorkerLaunch:
        return WorkerLaunch(
            topology=self._topology_json,
            instance=instance,
            run=self.run.to_dict(),
            options=self.options.__dict__.copy(),
            parent_pid=os.getpid(),
            sys_path=tuple(p for p in sys.path if p),
            attempt=attempt,
        )

    @property
    def _topology_json(self) -> str:
        cached = getattr(self, "_topology_json_cache", None)
        if cached is None:
            cached = self._topology_json_cache = self.topology.to_json(indent=None)
        return cached

    def _on_launched(self, worker: LaunchedWorker) -> None:
        if self._guard is not None:
            self._guard.watch(worker.pid)

    async def shutdown(self, grace: float = 5.0) -> None:
        """Stop admitting, let in-flight requests finish for up to ``grace`` seconds, fail the rest
        (``kind="shutdown"``), stop the workers (SIGKILL what does not stop), and remove the IPC
        directory and the run's shared memory."""
        if self._closed or not self._started:
            self._closed = True
            return
        self._accepting = False
        self._shutting_down = True
        deadline = time.perf_counter() + grace
        pending = [r.future for r in self._inflight.values()]
        if pending:
            log.info("draining %d request(s) in flight (up to %g s)", len(pending), grace)
            await asyncio.wait(pending, timeout=grace)
        left = list(self._inflight.values())
        if left:
            log.warning("%d request(s) did not finish within the %g s grace period: failing them", len(left), grace)
        for req in left:
            await self._cancel(req, RequestFailed("the runtime shut down before the request finished", kind="shutdown"))
        assert self.supervisor is not None
        self.supervisor.begin_stop()
        for worker in self.supervisor.alive():
            await self._send_quietly(worker.instance, E.header(E.SHUTDOWN))
        stopped = await self.supervisor.wait_exited(max(deadline - time.perf_counter(), 1.0))
        if not stopped:
            log.warning("processes %s did not stop in time: killing them", ", ".join(w.instance for w in self.supervisor.alive()))
        await self._teardown()

    async def _teardown(self) -> None:
        self._accepting = False
        self._shutting_down = True
        if self.supervisor is not None:
            await self.supervisor.kill_all()
        if self.backend is not None:
            await self.backend.close()
        for req in list(self._inflight.values()):
            self._finish(req, error=RequestFailed("the runtime stopped", kind="shutdown"))
        if self._recv_task is not None:
            self._recv_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._recv_task
        if self._plane is not None:
            self._plane.close()
        if self.run is not None:
            self.run.cleanup()
        if self._guard is not None:
            self._guard.close()
        if self._atexit is not None:
            atexit.unregister(self._atexit)
            self._atexit = None
        self._closed = True
        self._notify_change()

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- state ---------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """``status``: ``starting``, ``ready``, ``degraded`` (an instance is down, every process can still serve)
        or ``unhealthy``; ``healthy``: every instance ready; ``processes``: each instance's state."""
        if self.supervisor is None:
            states = {i.name: STARTING for i in self.topology.instances}
        else:
            states = {name: inst.state for name, inst in self.supervisor.instances.items()}
        if not self._ready and not self._closed:
            status = STATUS_STARTING
        elif self._closed or not self._accepting:
            status = STATUS_UNHEALTHY
        elif all(state == READY for state in states.values()):
            status = STATUS_READY
        elif self.chooser.can_serve({name: state == READY for name, state in states.items()}):
            status = STATUS_DEGRADED
        else:
            status = STATUS_UNHEALTHY
        return {"status": status, "healthy": status == STATUS_READY, "processes": states}

    @property
    def draining(self) -> bool:
        """True once shutdown began (new requests are refused with ``kind="shutdown"``)."""
        return self._shutting_down

    def supervision(self) -> dict[str, Any]:
        """Restarts by (instance, reason) and each start's seconds to ready, for ``/metrics``."""
        if self.supervisor is None:
            return {"restarts": {}, "ready_seconds": []}
        stats = self.supervisor.stats
        return {"restarts": dict(stats.restarts), "ready_seconds": list(stats.ready_seconds)}

    def queue_depths(self) -> dict[str, int]:
        """In-flight requests bound to each process instance."""
        return dict(self._load)

    def in_flight(self) -> int:
        """Requests admitted and not finished."""
        return len(self._inflight)

    @property
    def run_id(self) -> str | None:
        """The id in every actor's name (``omni:<run id>:<instance>``) with ``backend="ray"``."""
        return self._ray.run_id if self._ray is not None else None

    async def placements(self) -> dict[str, dict[str, Any]]:
        """Where each live instance runs: node id and address, pid, GPUs (Ray's device ids) and the logical -> local map."""
        if self._ray is not None:
            return await self._ray.placements()
        return {name: {"node_id": "local", "host": "127.0.0.1", "pid": pid} for name, pid in self.instance_pids().items()}

    async def transport_bytes(self) -> dict[str, dict[str, dict[str, int]]]:
        """Bytes each process sent to each peer, per transport (``ipc``, ``shm``, ``tcp``); ``backend="ray"`` only."""
        return await self._ray.transport_bytes() if self._ray is not None else {}

    def edge_transports(self) -> dict[tuple[str, str], str]:
        """``ipc`` (same node: sockets + shared memory) or ``tcp`` per pair of processes that talk."""
        if self._ray is not None:
            return self._ray.edge_transports()
        from ..raycluster.backend import instance_pairs

        return {pair: "ipc" for pair in instance_pairs(self.topology)}

    def instance_pids(self) -> dict[str, int | None]:
        """OS pid of each worker process (the last one of an instance that is down; for operators and tests)."""
        if self.supervisor is None:
            return {}
        return {name: inst.pid if inst.pid is not None else inst.last_pid for name, inst in self.supervisor.instances.items()}

    # -- sync helper ---------------------------------------------------------
    @classmethod
    @contextlib.contextmanager
    def running(cls, topology: Any, **kwargs: Any) -> Iterator[SyncRuntime]:
        """Start a runtime on a private event-loop thread; ``with Runtime.running(t) as rt: rt.synthesize(data)``."""
        sync = SyncRuntime(cls(topology, **kwargs))
        sync._start()
        try:
            yield sync
        finally:
            sync._stop()


def log_info(message: str) -> None:
    log.info("%s", message)


def _emergency_cleanup(supervisor: Supervisor, run: Any, guard: Any) -> None:
    """At interpreter exit without ``shutdown()``: kill workers, remove the IPC directory and shared memory."""
    supervisor.kill_all_sync()
    run.cleanup()
    guard.close(timeout=5.0)

