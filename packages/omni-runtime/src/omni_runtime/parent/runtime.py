"""The parent side: start the run, admit requests, collect results, keep workers alive, stop.

:class:`Runtime` composes the parent's parts, each an object with its own
narrow interface: a :class:`~.requests.RequestTable` (requests in flight,
finish, cancel, output credit), :class:`~.admission.Admission` (the table,
the replica chooser and the plane), a :class:`~.results.ResultRouter` (the
table and the supervisor), a :class:`~omni_runtime.control.ControlSender` (control
messages that never fail in silence), and a
:class:`~omni_runtime.launch.Backend` that owns both launching the workers
and the data plane to them.

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
import importlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from omni_compiler.topology import CompiledTopology

from .. import envelope as E
from ..control import ControlSender
from ..distributed.launch import RendezvousBook
from ..distributed.topology import group_health
from ..errors import RequestFailed, RuntimeNotRunning, StartupError
from ..launch import Backend, LaunchedWorker, RunSetup, WorkerLaunch, backend_named
from ..launch.registry import placement_notes
from ..routing import ReplicaChooser, Router, instance_pairs
from ..supervision import STARTING, HeartbeatWatch, Supervisor
from ..worker.options import WorkerOptions
from .admission import Admission, AdmissionLimits
from .appending import InputAppender
from .handle import RequestHandle
from .requests import RequestTable
from .results import ResultRouter
from .sync import SyncRuntime
from .watch import STATUS_READY, STATUS_STARTING, STATUS_UNHEALTHY, InstanceWatch, serving_status

log = logging.getLogger("omni.runtime")



class Runtime:
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
        log_level: str | None = None,
        log_format: str = "text",
        heartbeat_timeout: float | None = 30.0,
        arrays: str = "torch",
        **backend_options: Any,
    ) -> None:
        """``topology``: a :class:`CompiledTopology` or a ``PipelineConfig`` (compiled here, once).

        ``backend``: a name from :data:`omni_runtime.launch.registry.BUILTIN`
        (``"local"`` spawns one OS process per instance on this machine; the
        cluster backend places each instance on a node, see the README), built
        with ``backend_options`` (the cluster backend's address, say); or any
        :class:`~omni_runtime.launch.Backend`. ``log``: where the process table and the
        ready line go (default: the ``omni.runtime`` logger). ``log_level``/``log_format``:
        the workers' logging (default: this process's level, text), on every backend.
        ``heartbeat_timeout``: a ready worker that sent no heartbeat for this many seconds
        (frozen, or a stage blocking its event loop) is killed and restarted under its
        policy, its requests failed at once (``process_died``); None turns it off.
        ``arrays``: what tensors in results and streamed chunks are, ``"torch"`` (the
        default: what the stages produced) or ``"numpy"`` (``omni serve``: this process
        then never imports torch).
        """
        if arrays not in ("torch", "numpy"):
            raise ValueError(f"arrays must be 'torch' or 'numpy', got {arrays!r}")
        self.arrays = arrays
        if isinstance(backend, str):
            backend_options = {k: v for k, v in backend_options.items() if v is not None}
            backend = backend_named(backend, **backend_options)
        elif backend_options:
            raise ValueError(f"backend options ({', '.join(sorted(backend_options))}) are for a backend given by name")
        if not isinstance(topology, CompiledTopology):
            from omni_compiler import compile as compile_topology

            topology = compile_topology(topology)
        self.topology = topology
        if device not in (None, "cpu") and not str(device).startswith("cuda"):
            raise ValueError(f"device must be None, 'cpu' or 'cuda', got {device!r}")
        if request_timeout <= 0:
            raise ValueError(f"request_timeout must be > 0 seconds, got {request_timeout}")
        if heartbeat_timeout is not None and heartbeat_timeout <= 0:
            raise ValueError(f"heartbeat_timeout must be > 0 seconds (or None for no heartbeat), got {heartbeat_timeout}")
        if max_inflight is not None and max_inflight < 1:
            raise ValueError(f"max_inflight must be at least 1 (or None for no bound), got {max_inflight}")
        self.device = device
        self.startup_timeout = startup_timeout
        self.log = log or log_info
        self.router = Router(topology)
        self._rendezvous = RendezvousBook(topology, startup_timeout)
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
            heartbeat_interval=min(1.0, heartbeat_timeout / 4) if heartbeat_timeout else 0.0,
        )
        self.heartbeat_timeout = heartbeat_timeout
        self._heartbeats: HeartbeatWatch | None = None
        self.send_timeout = send_timeout
        self.request_timeout = request_timeout
        self.max_inflight = max_inflight
        self.backend: Backend = backend
        self.backend_name = backend.name
        self.supervisor: Supervisor | None = None
        self.run: Any = None
        self._guard: Any = None
        self._plane: Any = None
        self._recv_task: asyncio.Task[None] | None = None
        # the parts, each over the others' narrow interfaces
        self.watch = InstanceWatch()
        self.control = ControlSender()
        self.table = RequestTable((i.name for i in topology.instances), self.control, self.watch.is_ready)
        self.admission = Admission(
            self.table, self.chooser, self.router, self.watch, topology.entry_stage, AdmissionLimits(request_timeout, max_inflight, send_timeout)
        )
        self.results = ResultRouter(self.table, self.router, self.control, backend, lambda: self._shutting_down)
        self.appender = InputAppender(topology.entry_stage, self.router, self.control, self.results.reports, send_timeout)
        self._accepting = False
        self._started = False
        self._ready = False
        self._closed = False
        self._startup: asyncio.Future[None] | None = None
        self._shutting_down = False
        self._atexit: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

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

        from .run_guard import RunGuard

        self._loop = asyncio.get_running_loop()
        # The data plane (zmq, numpy; torch too with arrays="torch") takes a while on a busy host. Import it off the event loop
        # so a server that already listens keeps answering /health ("starting") meanwhile.
        await self._loop.run_in_executor(None, importlib.import_module, "omni_runtime.plane")
        from ..transport import RunDir

        self.table.loop = self.results.loop = self._loop
        if not logging.getLogger().handlers:  # nobody set up logging: the runtime's events still show
            from .. import logs

            logs.configure(self.options.log_level, self.options.log_format)
        self.log(render.table(self.topology))
        began = time.perf_counter()
        self.run = run = RunDir.create(base=os.environ.get("OMNI_RUNTIME_IPC_DIR"))
        self._guard = guard = RunGuard(run.path, run.shm_prefix)
        self._startup = self.results.startup = self._loop.create_future()
        self.results.shm_prefix = run.shm_prefix
        for note in placement_notes(self.backend_name, self.topology):
            self.log(note)
        try:
            setup = RunSetup(self.topology, self.options, self.startup_timeout, self.send_timeout, self.arrays)
            self._plane = await self.backend.open(run, setup)
            self.control.attach(self._plane)
            self.admission.plane = self.results.plane = self._plane
            self.supervisor = supervisor = Supervisor(
                self.topology, self.backend, self._make_launch, self.results.on_death, self.watch.notify, on_launched=self._on_launched
            )
            self.watch.attach(supervisor)
            self.results.supervisor = supervisor
            self._atexit = lambda: _emergency_cleanup(supervisor, run, guard)
            atexit.register(self._atexit)
            self._recv_task = self._loop.create_task(self.results.receive())
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
        if self.heartbeat_timeout:
            self._heartbeats = self.results.heartbeats = HeartbeatWatch(self.supervisor, self.heartbeat_timeout)
            self._heartbeats.start()
        self._accepting = True
        self._ready = True
        count = len(self.topology.instances)
        self.log(f"omni: {count} process{'es' if count != 1 else ''} ready in {time.perf_counter() - began:.1f} s")

    def _make_launch(self, instance: str, attempt: int) -> WorkerLaunch:
        return WorkerLaunch(
            topology=self._topology_json,
            instance=instance,
            run={**self.run.to_dict(), **self._rendezvous.for_launch(instance, attempt)},
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
        pending = [r.future for r in self.table.inflight.values()]
        if pending:
            log.info("draining %d request(s) in flight (up to %g s)", len(pending), grace)
            await asyncio.wait(pending, timeout=grace)
        left = list(self.table.inflight.values())
        if left:
            log.warning("%d request(s) did not finish within the %g s grace period: failing them", len(left), grace)
        for req in left:
            await self.table.cancel(req, RequestFailed("the runtime shut down before the request finished", kind="shutdown"))
        assert self.supervisor is not None
        self.supervisor.begin_stop()
        for worker in self.supervisor.alive():
            await self.control.send(worker.instance, E.header(E.SHUTDOWN))
        stopped = await self.supervisor.wait_exited(max(deadline - time.perf_counter(), 1.0))
        if not stopped:
            log.warning("processes %s did not stop in time: killing them", ", ".join(w.instance for w in self.supervisor.alive()))
        await self._teardown()

    async def _teardown(self) -> None:
        self._accepting = False
        self._shutting_down = True
        if self._heartbeats is not None:
            await self._heartbeats.stop()
        if self.supervisor is not None:
            await self.supervisor.kill_all()
        await self.backend.close()
        for req in list(self.table.inflight.values()):
            self.table.finish(req, error=RequestFailed("the runtime stopped", kind="shutdown"))
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
        self.watch.notify()

    # -- requests ------------------------------------------------------------
    async def submit(self, data: dict[str, Any], *, timeout: float | None = None) -> RequestHandle:
        """Admit one request with the entry payload ``data``; returns once its entry payload is sent.

        ``timeout``: seconds until the request's deadline (default: the
        runtime's ``request_timeout``); past it the request fails with
        ``kind="deadline"`` and is cancelled in every stage.
        """
        if not self._accepting:
            if self._shutting_down:
                raise RuntimeNotRunning("the runtime is shutting down and admits no new requests")
            raise RuntimeNotRunning("the runtime is not accepting requests (not started, stopping or stopped)")
        assert self._loop is not None
        self.results.reports.check_input(self.topology.entry_stage, data)
        req = await self.admission.admit(data, timeout, self._loop)
        return RequestHandle(self.table, req, self.appender)

    def supports_append(self) -> bool:
        """Whether the entry stage takes input appended to a running request (``RequestHandle.append``): its
        stage object has an ``append`` hook, as its worker reported at ready (False before ready)."""
        return self.appender.supported()

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- state ---------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """``status``: ``starting``, ``ready``, ``degraded`` (an instance is down, every process can still serve),
        ``restarting`` (a process needed to serve is down and being restarted under its policy) or ``unhealthy``
        (one is down for good: past its restart budget, or stopped); ``healthy``: every instance ready;
        ``processes``: each instance's state; ``tp_groups`` (only with TP stages): each group's state and
        its ranks (``omni_runtime.distributed``)."""
        states = {i.name: self.watch.state_of(i.name) for i in self.topology.instances}
        if not self._ready and not self._closed:
            status = STATUS_STARTING
        elif self._closed or not self._accepting:
            status = STATUS_UNHEALTHY
        else:
            status = serving_status(states, self.chooser)
        out = {"status": status, "healthy": status == STATUS_READY, "processes": states}
        groups = group_health(self.topology, states)
        if groups:  # a topology with TP stages: each group's state and its ranks
            out["tp_groups"] = groups
        return out

    @property
    def draining(self) -> bool:
        """True once shutdown began (new requests are refused with ``kind="shutdown"``)."""
        return self._shutting_down

    def supervision(self) -> dict[str, Any]:
        """Restarts by (instance, reason), each start's seconds to ready, and control messages that could not
        be sent by (kind, peer): the parent's own, and the workers' by (sender, kind, peer) as their heartbeats
        reported them, for ``/metrics``."""
        stats = self.supervisor.stats if self.supervisor is not None else None
        return {
            "restarts": dict(stats.restarts) if stats is not None else {},
            "ready_seconds": list(stats.ready_seconds) if stats is not None else [],
            "control_failures": self.control.counts(),
            "worker_control_failures": dict(self.results.worker_control_failures),
        }

    def queue_depths(self) -> dict[str, int]:
        """In-flight requests bound to each process instance."""
        return dict(self.table.load)

    def in_flight(self) -> int:
        """Requests admitted and not finished."""
        return len(self.table)

    def voices(self) -> tuple[str, ...]:
        """The preset voices the model lists (``VOICES`` of its entry stage's module, else of the first stage
        module that has one), as the workers reported them at ready: the parent never imports a stage module."""
        return self.results.reports.model_voices(self.topology)

    def request_limits(self) -> dict[str, int]:
        """What the entry stage declared it accepts (``REQUEST_LIMITS`` of its module or stage object:
        ``max_input_chars``, ``sample_rate``), as its worker reported at ready; empty when it declares none."""
        return dict(self.results.reports.limits.get(self.topology.entry_stage, {}))

    def control_failures(self) -> dict[tuple[str, str], int]:
        """Control messages (cancel, credit, shutdown, peer list) that could not be sent, by (kind, peer)."""
        return self.control.counts()

    @property
    def run_id(self) -> str | None:
        """The backend's id of this run, where it names one (the cluster backend's actor names carry it)."""
        return self.backend.run_id

    async def placements(self) -> dict[str, dict[str, Any]]:
        """Where each live instance runs: node id and address, pid, and on a cluster its GPUs and the logical -> local map."""
        return await self.backend.placements(self.instance_pids())

    async def transport_bytes(self) -> dict[str, dict[str, dict[str, int]]]:
        """Bytes each process sent to each peer, per transport (``ipc``, ``shm``, ``tcp``), where the backend counts them."""
        return await self.backend.transport_bytes()

    def edge_transports(self) -> dict[tuple[str, str], str]:
        """``ipc`` (same node: sockets + shared memory) or ``tcp`` per pair of processes that talk."""
        return self.backend.edge_transports(instance_pairs(self.topology, E.PARENT))

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

