"""The parent side: admit requests, bind replicas, collect results, watch workers.

The parent never imports a stage factory and is not on the stage-to-stage data
path: it sends the entry payload to the entry stage's process and receives the
terminal result (and streamed output chunks). Workers hand payloads to each
other directly.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from omni_compiler.topology import CompiledTopology

from . import envelope as E
from .errors import RequestFailed, RuntimeNotRunning, StartupError
from .handle import END, Inflight, RequestHandle
from .launcher import DEAD, READY, STARTING, STOPPED, Launcher, WorkerProcess, describe_exit
from .routing import ReplicaChooser, Router
from .sync import SyncRuntime
from .worker import WorkerOptions

BACKENDS = ("local", "ray")

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
        log: Callable[[str], Any] | None = print,
        stage_threads: int = 64,
        shm_budget_bytes: int = 1 << 30,
        send_timeout: float = 30.0,
        backend: str = "local",
        ray_address: str | None = None,
    ) -> None:
        """``topology``: a :class:`CompiledTopology` or a ``PipelineConfig`` (compiled here, once).

        ``backend``: ``"local"`` spawns one OS process per instance on this machine;
        ``"ray"`` runs each instance as a Ray actor placed from ``processes.<P>.ray``
        (``ray_address`` as ``ray.init`` takes it, ``"auto"`` included; without one a
        local Ray is started and stopped with the runtime).
        """
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if ray_address is not None and backend != "ray":
            raise ValueError("ray_address is only used with backend='ray'")
        if not isinstance(topology, CompiledTopology):
            from omni_compiler import compile as compile_topology

            topology = compile_topology(topology)
        self.topology: CompiledTopology = topology
        if device not in (None, "cpu") and not str(device).startswith("cuda"):
            raise ValueError(f"device must be None, 'cpu' or 'cuda', got {device!r}")
        self.device = device
        self.startup_timeout = startup_timeout
        self.log = log or (lambda _msg: None)
        self.router = Router(topology)
        self.chooser = ReplicaChooser(self.router, replica_policy)
        self.options = WorkerOptions(
            device=device,
            model_path=model_path,
            enforce_memory_fraction=enforce_memory_fraction,
            stage_threads=stage_threads,
            shm_budget_bytes=shm_budget_bytes,
        )
        self.send_timeout = send_timeout
        self.backend = backend
        self.ray_address = ray_address
        self._ray: Any = None
        self.run: Any = None
        self._plane: Any = None
        self._launcher: Launcher | None = None
        self._recv_task: asyncio.Task[None] | None = None
        self._inflight: dict[str, Inflight] = {}
        self._load: dict[str, int] = {i.name: 0 for i in topology.instances}
        self._accepting = False
        self._started = False
        self._closed = False
        self._startup: asyncio.Future[None] | None = None
        self._startup_failure: StartupError | None = None
        self._shutting_down = False
        self._atexit: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle -----------------------------------------------------------
    async def start(self) -> None:
        """Print the table, spawn one process per instance and wait until every stage is built.

        Raises :class:`StartupError` (stage, process, traceback) when a factory
        fails, a worker dies while starting, or ``startup_timeout`` passes; every
        started process is then stopped and the IPC directory removed.
        """
        if self._started:
            raise RuntimeError("Runtime.start() was already called")
        self._started = True
        from omni_compiler import render

        from .plane import Plane
        from .transport import RunDir

        self._loop = asyncio.get_running_loop()
        self.log(render.table(self.topology))
        began = time.perf_counter()
        self.run = run = RunDir.create(base=os.environ.get("OMNI_RUNTIME_IPC_DIR"))
        self._startup = self._loop.create_future()
        if self.backend == "local":
            self._launcher = launcher = Launcher(self.topology, json.dumps(run.to_dict()), self.options, self._on_exit)
            ignored = sorted({p.declared_process for p in self.topology.processes if p.ray})
            if ignored:
                self.log(f"omni: processes.<P>.ray of {', '.join(ignored)} is ignored by the local backend (it places on Ray with --backend ray)")
        else:
            from .raycluster.backend import RayBackend

            self._ray = RayBackend(self.topology, self.options, self._on_exit, self.ray_address, self.send_timeout)
        try:
            if self._ray is not None:
                self._plane, launcher = await self._ray.open(run, self.startup_timeout)
                self._launcher = launcher  # type: ignore[assignment]
            else:
                self._plane = Plane(run, E.PARENT, self.options.shm_budget_bytes)
            self._atexit = lambda: _emergency_cleanup(launcher, run)
            atexit.register(self._atexit)
            self._recv_task = self._loop.create_task(self._receive())
            launcher.spawn_all()
            try:
                await asyncio.wait_for(asyncio.shield(self._startup), self.startup_timeout)
            except asyncio.TimeoutError:
                waiting = [wp.name for wp in launcher.workers.values() if wp.state == STARTING]
                raise StartupError(
                    None,
                    ", ".join(waiting),
                    "",
                    reason=f"not ready after startup_timeout={self.startup_timeout:g} s (raise startup_timeout if loading is slow)",
                ) from None
        except BaseException:
            if not self._startup.done():
                self._startup.cancel()
            await self._teardown(kill=True)
            raise
        for inst in self.topology.instances:
            self._plane.outbox(inst.name)
        self._accepting = True
        count = len(self.topology.instances)
        self.log(f"omni: {count} process{'es' if count != 1 else ''} ready in {time.perf_counter() - began:.1f} s")

    async def shutdown(self, grace: float = 5.0) -> None:
        """Stop admitting, let in-flight requests finish for up to ``grace`` seconds, stop the
        workers (SIGKILL after the grace period), fail what is left, and remove the IPC
        directory and the run's shared memory."""
        if self._closed or not self._started:
            self._closed = True
            return
        self._accepting = False
        self._shutting_down = True
        deadline = time.perf_counter() + grace
        pending = [r.future for r in self._inflight.values()]
        if pending:
            await asyncio.wait(pending, timeout=grace)
        for req in list(self._inflight.values()):
            await self._cancel(req, RequestFailed("the runtime shut down before the request finished", kind="shutdown"))
        assert self._launcher is not None
        for wp in self._launcher.alive():
            with contextlib.suppress(Exception):
                await self._plane.outbox(wp.name).send(E.header(E.SHUTDOWN), timeout=1.0)
        stopped = await self._launcher.wait_exited(max(deadline - time.perf_counter(), 1.0))
        await self._teardown(kill=not stopped)

    async def _teardown(self, kill: bool) -> None:
        self._accepting = False
        self._shutting_down = True
        launcher = self._launcher
        if launcher is not None:
            await launcher.kill_all()
            launcher.close()
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
        if self._atexit is not None:
            atexit.unregister(self._atexit)
            self._atexit = None
        self._closed = True

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- requests ------------------------------------------------------------
    async def submit(self, data: dict[str, Any]) -> RequestHandle:
        """Admit one request with the entry payload ``data``; returns at once with its handle."""
        if not self._accepting:
            raise RuntimeNotRunning("the runtime is not accepting requests (not started, stopping or stopped)")
        alive = {name: wp.state == READY for name, wp in self._launcher.workers.items()}  # type: ignore[union-attr]
        binding = self.chooser.choose(self._load, alive)
        if binding is None:
            raise RequestFailed("no live replica is left for a replicated process; see health()", kind="unavailable")
        instances = frozenset(self.router.instances_of_binding(binding))
        dead = sorted(name for name in instances if not alive.get(name))
        if dead:
            raise RequestFailed(f"process {', '.join(dead)} is not running; see health()", kind="unavailable")
        assert self._loop is not None
        rid = uuid.uuid4().hex
        req = Inflight(rid, binding, instances, self._loop.create_future(), asyncio.Queue(), submitted=time.perf_counter())
        self._inflight[rid] = req
        for name in instances:
            self._load[name] += 1
        header = E.header(E.RUN, rid=rid, stage=self.topology.entry_stage, binding=binding, has_data=True)
        try:
            for target in self.router.targets(self.topology.entry_stage, binding):
                # timeout=None keeps the send on pyzmq's non-blocking fast path (no poll per request);
                # wait_for still bounds it if the worker died before its exit was noticed
                await asyncio.wait_for(self._plane.outbox(target.instance).send(header, data, timeout=None), self.send_timeout)
        except BaseException as exc:
            self._finish(req, error=RequestFailed(f"could not admit the request: {exc}", kind="unavailable"))
            await self._broadcast_cancel(req)
            raise req.future.exception() from exc  # type: ignore[misc]
        return RequestHandle(self, req)

    def health(self) -> dict[str, Any]:
        states = {name: wp.state for name, wp in self._launcher.workers.items()} if self._launcher else {i.name: STARTING for i in self.topology.instances}
        healthy = self._accepting and all(state == READY for state in states.values())
        return {"healthy": healthy, "processes": states}

    def queue_depths(self) -> dict[str, int]:
        """In-flight requests bound to each process instance."""
        return dict(self._load)

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
        from .raycluster.backend import instance_pairs

        return {pair: "ipc" for pair in instance_pairs(self.topology)}

    def instance_pids(self) -> dict[str, int | None]:
        """OS pid of each worker process (for operators and tests)."""
        return {name: wp.pid for name, wp in self._launcher.workers.items()} if self._launcher else {}

    async def _cancel(self, req: Inflight, error: RequestFailed) -> None:
        if req.future.done():
            return
        self._finish(req, error=error)
        await self._broadcast_cancel(req)

    async def _broadcast_cancel(self, req: Inflight, skip: str | None = None) -> None:
        header = E.header(E.CANCEL, rid=req.rid)
        for name in req.instances:
            wp = self._launcher.workers.get(name) if self._launcher else None
            if name == skip or wp is None or wp.state != READY or self._plane is None:
                continue
            with contextlib.suppress(Exception):
                await self._plane.outbox(name).send(header, timeout=1.0)

    def _finish(self, req: Inflight, result: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
        if req.future.done():
            return
        if self._inflight.pop(req.rid, None) is not None:
            for name in req.instances:
                self._load[name] -= 1
        if error is not None:
            req.future.set_exception(error)
            req.future.exception()  # retrieved: a caller that only streams must not trigger "never retrieved"
        else:
            req.future.set_result(result or {})
        req.chunks.put_nowait(END)

    # -- inbound -------------------------------------------------------------
    async def _receive(self) -> None:
        inbox = self._plane.inbox
        while True:
            try:
                batch = await inbox.recv_batch()  # every queued message at once: no await per message
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a malformed message must not stop the parent
                self.log(f"omni: dropped a malformed message: {exc}")
                continue
            for msg in batch:
                try:
                    await self._dispatch(msg)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - one bad message must not stop every request
                    self.log(f"omni: error while handling a {msg.header.get(E.KIND)!r} message: {type(exc).__name__}: {exc}")
            # Let the callers whose requests this batch completed resume before this loop
            # sets up its next wait (same loop iteration, but their result comes first).
            await asyncio.sleep(0)

    async def _dispatch(self, msg: Any) -> None:
        """Handle one message from a worker (runs on the parent's receive loop)."""
        h = msg.header
        kind = h[E.KIND]
        if kind == E.READY:
            endpoint = msg.payload() if h.get(E.HAS_DATA) else None
            if self._ray is not None:
                await self._ray.ready(h[E.SRC], endpoint)
            self._on_ready(h[E.SRC])
            return
        if kind == E.STARTUP_ERROR:
            tb = msg.payload() if h.get(E.HAS_DATA) else ""
            self._on_startup_error(h[E.SRC], h.get(E.STAGE) or None, tb)
            return
        req = self._inflight.get(h.get(E.RID, ""))
        if req is None:
            msg.discard()
            return
        try:
            data = (await msg.payload_async()) if h.get(E.HAS_DATA) else None
        except Exception as exc:  # noqa: BLE001 - an undecodable result fails its request
            msg.discard()
            self._finish(req, error=RequestFailed(f"could not decode a message for the request: {exc}"))
            await self._broadcast_cancel(req)
            return
        if kind == E.OUT:
            req.chunks.put_nowait(data)
        elif kind == E.RESULT:
            req.timings.update(h.get(E.TIMINGS, {}))
            self._finish(req, result=data)
        elif kind == E.ERROR:
            req.timings.update(h.get(E.TIMINGS, {}))
            stage = h.get(E.STAGE, "")
            process = self.router.stages[stage].process if stage in self.router.stages else None
            error = RequestFailed(h.get(E.TEXT, "stage failed"), stage=stage or None, process=process)
            if E.PARAM in h:
                error.kind, error.param = "invalid_request", str(h[E.PARAM])
            error.detail = data if isinstance(data, str) else ""
            self._finish(req, error=error)
            await self._broadcast_cancel(req, skip=h.get(E.SRC))

    def _on_ready(self, name: str) -> None:
        assert self._launcher is not None
        wp = self._launcher.workers.get(name)
        if wp is None or wp.state != STARTING:
            return
        wp.state = READY
        if all(w.state == READY for w in self._launcher.workers.values()) and self._startup and not self._startup.done():
            self._startup.set_result(None)

    def _on_startup_error(self, name: str, stage: str | None, tb: str) -> None:
        if self._startup is not None and not self._startup.done():
            self._startup.set_exception(StartupError(stage, name, tb))

    def _on_exit(self, wp: WorkerProcess) -> None:
        was = wp.state
        code = wp.exited.result()
        how = getattr(wp, "reason", "") or describe_exit(code)  # a Ray actor says why it ended in words
        wp.state = STOPPED if self._shutting_down else DEAD
        if was == STARTING and self._startup is not None and not self._startup.done():
            self._startup.set_exception(StartupError(None, wp.name, "", reason=f"the process {how} before it was ready"))
            return
        if self._shutting_down:
            return
        message = f"process {wp.name} {how} while the request was in flight"
        for req in [r for r in self._inflight.values() if wp.name in r.instances]:
            self._finish(req, error=RequestFailed(message, process=wp.name, kind="process_died"))
            assert self._loop is not None
            self._loop.create_task(self._broadcast_cancel(req, skip=wp.name))

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


def _emergency_cleanup(launcher: Launcher, run: Any) -> None:
    """At interpreter exit without ``shutdown()``: kill workers, remove the IPC directory and shared memory."""
    launcher.kill_all_sync()
    run.cleanup()
