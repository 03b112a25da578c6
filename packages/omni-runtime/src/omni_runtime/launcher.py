"""Spawn, watch and stop the worker OS processes of one run.

One ``spawn``-method process per topology instance, given only JSON strings.
Process death is observed through each process's sentinel file descriptor on
the event loop (no polling), so a killed worker is noticed at once.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field

from omni_compiler.topology import CompiledTopology

from . import worker

STARTING = "starting"
READY = "ready"
DEAD = "dead"
STOPPED = "stopped"


@dataclass
class WorkerProcess:
    name: str
    process: multiprocessing.process.BaseProcess
    pid: int | None = None
    state: str = STARTING
    exited: asyncio.Future[int] = field(default=None)  # type: ignore[assignment]


def describe_exit(code: int | None) -> str:
    if code is None:
        return "is still running"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class Launcher:
    def __init__(self, topology: CompiledTopology, run_json: str, options: worker.WorkerOptions, on_exit: Callable[[WorkerProcess], None]) -> None:
        self.topology = topology
        self.run_json = run_json
        self.options = options
        self.on_exit = on_exit
        self.workers: dict[str, WorkerProcess] = {}
        self._ctx = multiprocessing.get_context("spawn")
        self._loop: asyncio.AbstractEventLoop | None = None

    def spawn_all(self) -> None:
        self._loop = asyncio.get_running_loop()
        topology_json = self.topology.to_json(indent=None)
        options_json = self.options.to_json()
        for inst in self.topology.instances:
            proc = self._ctx.Process(
                target=worker.main,
                args=(topology_json, inst.name, self.run_json, os.getpid(), options_json),
                name=f"omni:{inst.name}",
                daemon=False,
            )
            proc.start()
            wp = WorkerProcess(inst.name, proc, pid=proc.pid, exited=self._loop.create_future())
            self.workers[inst.name] = wp
            self._loop.add_reader(proc.sentinel, self._reap, wp)

    def _reap(self, wp: WorkerProcess) -> None:
        assert self._loop is not None
        self._loop.remove_reader(wp.process.sentinel)
        # The sentinel closes while the kernel is still tearing the process down;
        # wait (briefly) for it to become reapable so no zombie is left behind.
        wp.process.join(timeout=2.0)
        if not wp.exited.done():
            wp.exited.set_result(wp.process.exitcode if wp.process.exitcode is not None else -9)
        self.on_exit(wp)

    def alive(self) -> list[WorkerProcess]:
        return [wp for wp in self.workers.values() if not wp.exited.done()]

    async def wait_exited(self, timeout: float) -> bool:
        pending = [wp.exited for wp in self.alive()]
        if not pending:
            return True
        _done, not_done = await asyncio.wait(pending, timeout=max(timeout, 0.0))
        return not not_done

    async def kill_all(self, timeout: float = 5.0) -> None:
        """SIGKILL every live worker and wait until the kernel has reaped it."""
        for wp in self.alive():
            try:
                wp.process.kill()
            except (OSError, AttributeError):
                pass
        await self.wait_exited(timeout)
        for wp in self.workers.values():
            if not wp.exited.done():  # loop stopped watching: reap synchronously
                wp.process.join(timeout=1.0)

    def kill_all_sync(self) -> None:
        """Last-resort cleanup (interpreter exit without shutdown)."""
        for wp in self.workers.values():
            if wp.process.exitcode is None:
                try:
                    wp.process.kill()
                except (OSError, AttributeError, ValueError):
                    pass
        for wp in self.workers.values():
            try:
                wp.process.join(timeout=2.0)
            except (AssertionError, ValueError):
                pass

    def close(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            for wp in self.workers.values():
                try:
                    self._loop.remove_reader(wp.process.sentinel)
                except (ValueError, OSError):
                    pass
        for wp in self.workers.values():
            try:
                wp.process.close()
            except ValueError:
                pass  # still running: leave it to kill_all_sync
