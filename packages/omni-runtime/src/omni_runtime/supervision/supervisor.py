"""Start every process instance, watch it, and restart what dies under its process's policy.

The supervisor sits above a :class:`~omni_runtime.launch.Backend`: the backend
starts and kills workers, the supervisor decides. Each instance is in one
state: ``starting`` (launched, not ready yet), ``ready``, ``restarting`` (it
died; a new one is scheduled or starting), ``dead`` (it died and its restart
budget is spent, or its policy allows none) or ``stopped`` (the runtime
shut it down). A restart reuses the instance name, the launch options and so
the device and environment; its stages are rebuilt in declaration order by
the new worker. Each restart's reason (the signal, the exit status, or the
startup traceback of a failed restart) and its time to ready are logged and
kept in :meth:`Supervisor.stats` for ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from omni_compiler.topology import CompiledTopology

from ..launch import Backend, ExitInfo, LaunchedWorker, WorkerLaunch
from ..launch.backend import all_exited
from .policy import RestartBudget, RestartPolicy
from .tp_groups import GroupRestarts

log = logging.getLogger("omni.supervisor")

STARTING = "starting"
READY = "ready"
RESTARTING = "restarting"
DEAD = "dead"
STOPPED = "stopped"
STATES = (STARTING, READY, RESTARTING, DEAD, STOPPED)


@dataclass
class Instance:
    """One process instance across its restarts."""

    name: str
    policy: RestartPolicy
    budget: RestartBudget
    state: str = STARTING
    worker: LaunchedWorker | None = None
    last_pid: int | None = None
    attempt: int = 0
    launched_at: float = 0.0
    died_at: float | None = None
    startup_error: str = ""
    term_requested: bool = False
    last_exit: ExitInfo | None = None
    silent_for: float | None = None
    """Set when the instance was killed for sending no heartbeat for this many seconds."""
    restart_timer: asyncio.TimerHandle | None = None

    @property
    def pid(self) -> int | None:
        return self.worker.pid if self.worker is not None else None


@dataclass
class SupervisorStats:
    """Counts for ``/metrics``: restarts by instance and reason, times from launch to ready."""

    restarts: Counter[tuple[str, str]] = field(default_factory=Counter)
    ready_seconds: list[tuple[str, float]] = field(default_factory=list)


class Supervisor:
    """The instances of one run; ``on_death`` and ``on_change`` tell the runtime what happened."""

    def __init__(
        self,
        topology: CompiledTopology,
        backend: Backend,
        make_launch: Callable[[str, int], WorkerLaunch],
        on_death: Callable[[Instance, ExitInfo], None],
        on_change: Callable[[], None],
        on_launched: Callable[[LaunchedWorker], None] = lambda _w: None,
    ) -> None:
        self.topology = topology
        self.backend = backend
        self._make_launch = make_launch
        self._on_death = on_death
        self._on_change = on_change
        self._on_launched = on_launched
        policies = {p.name: RestartPolicy.from_topology(p.restart) for p in topology.processes}
        self.instances: dict[str, Instance] = {}
        for inst in topology.instances:
            policy = policies[inst.process]
            self.instances[inst.name] = Instance(inst.name, policy, RestartBudget(policy))
        self.stats = SupervisorStats()
        self.tp_groups = GroupRestarts(topology)
        self.restarting_enabled = False
        """False until the first start completed: a failure while starting is a StartupError, not a restart."""
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- starting -----------------------------------------------------------
    async def start_all(self) -> None:
        self._loop = asyncio.get_running_loop()
        for inst in self.instances.values():
            await self._launch(inst)

    async def _launch(self, inst: Instance) -> None:
        inst.launched_at = time.monotonic()
        inst.startup_error = ""
        inst.term_requested = False
        inst.silent_for = None
        worker = await self.backend.launch(self._make_launch(inst.name, inst.attempt))
        inst.worker = worker
        inst.last_pid = worker.pid
        self._on_launched(worker)
        worker.exited.add_done_callback(lambda fut, w=worker: self._exited(inst, w, fut))

    def on_ready(self, name: str) -> None:
        inst = self.instances.get(name)
        if inst is None or inst.state not in (STARTING, RESTARTING):
            return
        seconds = time.monotonic() - inst.launched_at
        self.stats.ready_seconds.append((name, seconds))
        if inst.attempt:
            since = f", {time.monotonic() - inst.died_at:.1f} s after it died" if inst.died_at is not None else ""
            log.info("process %s ready again after restart %d (%.1f s to ready%s)", name, inst.attempt, seconds, since)
        inst.state = READY
        self._on_change()

    def on_startup_error(self, name: str, stage: str | None, tb: str) -> None:
        """A (re)started worker failed to build a stage; it exits next, and its exit counts as the failure."""
        inst = self.instances.get(name)
        if inst is None:
            return
        last = tb.strip().splitlines()[-1] if tb.strip() else "failed to start"
        inst.startup_error = f"stage {stage}: {last}" if stage else last
        if self.restarting_enabled:
            log.error("restart %d of process %s failed to start (stage %s):\n%s", inst.attempt, name, stage or "-", tb.rstrip())

    def kill_unresponsive(self, name: str, silent_for: float) -> None:
        """The instance sent no heartbeat for ``silent_for`` seconds: kill it (its exit is handled as any death)."""
        inst = self.instances.get(name)
        if inst is None or inst.worker is None or self.stopping:
            return
        inst.silent_for = silent_for
        log.warning("process %s sent no heartbeat for %.1f s (frozen or blocked): killing it", name, silent_for)
        inst.worker.kill()

    def on_term(self, name: str) -> None:
        """The instance got SIGTERM on its own: it takes no new requests (it is stopped, then restarted)."""
        inst = self.instances.get(name)
        if inst is not None:
            inst.term_requested = True
            if inst.state == READY:
                inst.state = RESTARTING
                self._on_change()

    # -- dying --------------------------------------------------------------
    def _exited(self, inst: Instance, worker: LaunchedWorker, fut: asyncio.Future[ExitInfo]) -> None:
        if fut.cancelled() or inst.worker is not worker:
            return
        info = fut.result()
        inst.last_exit = info
        inst.worker = None
        inst.died_at = time.monotonic()
        if self.stopping:
            inst.state = STOPPED
            self._on_change()
            return
        was_ready = inst.state == READY or inst.term_requested
        inst.state = DEAD
        self._on_death(inst, info)
        if not self.restarting_enabled:
            self._on_change()
            return
        reason = self.reason(inst, info)
        if self.tp_groups.handle_exit(self, inst, reason):  # a TP rank: its whole group restarts as one unit
            return
        delay = inst.budget.take()
        if delay is None:
            if inst.policy.max_restarts == 0:
                log.error("process %s %s; its restart policy allows no restarts (max_restarts: 0): it stays down", inst.name, _what(inst, info))
            else:
                log.error(
                    "process %s %s; %d restarts within %g s spent its budget (processes.%s.restart): it stays down",
                    inst.name, _what(inst, info), inst.policy.max_restarts, inst.policy.window_s, self._process_of(inst.name),
                )
            self._on_change()
            return
        self.stats.restarts[(inst.name, reason)] += 1
        inst.state = RESTARTING
        log.warning(
            "process %s %s%s; restarting it in %.1f s (restart %d of %d within %g s)",
            inst.name, _what(inst, info), "" if was_ready else " before it was ready", delay, inst.budget.used, inst.policy.max_restarts, inst.policy.window_s,
        )
        self._on_change()
        assert self._loop is not None
        inst.restart_timer = self._loop.call_later(delay, lambda: self._loop.create_task(self._restart(inst)))

    async def _restart(self, inst: Instance) -> None:
        inst.restart_timer = None
        if self.stopping or inst.state != RESTARTING:
            return
        inst.attempt += 1
        try:
            await self._launch(inst)
        except Exception as exc:  # noqa: BLE001 - a backend that cannot start the worker: it stays down
            log.error("process %s could not be restarted: %s: %s", inst.name, type(exc).__name__, exc)
            inst.state = DEAD
            self._on_change()

    def reason(self, inst: Instance, info: ExitInfo) -> str:
        """Why the instance ended, as a short label: ``SIGKILL``, ``SIGTERM``, ``exit 1``, ``startup error``."""
        if inst.startup_error:
            return "startup error"
        if inst.silent_for is not None:
            return "no heartbeat"
        if inst.term_requested and info.code == 0:
            return "SIGTERM"
        return info.reason

    def _process_of(self, name: str) -> str:
        for inst in self.topology.instances:
            if inst.name == name:
                return inst.process
        return name

    # -- stopping -----------------------------------------------------------
    def begin_stop(self) -> None:
        self.stopping = True
        for inst in self.instances.values():
            if inst.restart_timer is not None:
                inst.restart_timer.cancel()
                inst.restart_timer = None
            if inst.worker is None and inst.state != DEAD:
                inst.state = STOPPED

    def alive(self) -> list[LaunchedWorker]:
        return [i.worker for i in self.instances.values() if i.worker is not None and not i.worker.exited.done()]

    async def wait_exited(self, timeout: float) -> bool:
        return await all_exited([w.exited for w in self.alive()], timeout)

    async def kill_all(self, timeout: float = 5.0) -> None:
        """End every live worker now and wait until each is gone."""
        self.begin_stop()
        for worker in self.alive():
            worker.kill()
        await self.wait_exited(timeout)
        for inst in self.instances.values():
            if inst.state != DEAD:
                inst.state = STOPPED

    def kill_all_sync(self) -> None:
        """Interpreter exit without shutdown: no event loop to wait on."""
        self.stopping = True
        for inst in self.instances.values():
            if inst.worker is not None:
                with contextlib.suppress(Exception):
                    inst.worker.kill_now_sync()


def _what(inst: Instance, info: ExitInfo) -> str:
    if inst.startup_error:
        return f"failed to start ({inst.startup_error})"
    if inst.silent_for is not None:
        return silent_words(inst.silent_for)
    if inst.term_requested and info.code == 0:
        return "stopped after SIGTERM"
    return info.describe()


def silent_words(seconds: float) -> str:
    """How a worker killed for its missing heartbeat is described to operators and clients."""
    return f"sent no heartbeat for {seconds:.1f} s (frozen or blocked) and was killed"
