"""Seeing a frozen worker: heartbeats with a timeout.

A worker that stopped making progress (SIGSTOP, a stage that blocks its event
loop, a deadlock) still exists, so nothing reports it dead: its requests
would wait out their deadlines, and new ones would keep being bound to it.
Every ready worker sends a heartbeat each ``heartbeat_interval`` seconds; one
that sent none for ``timeout`` seconds is killed, which the supervisor sees as
any other death: its requests fail at once (``process_died``), ``/health``
shows it ``restarting`` (or ``dead`` past its budget) and it is restarted
under its policy, the restart counted with the reason ``no heartbeat``.

The heartbeats arrive on the parent's event loop, as the checks run there: when that loop
was blocked (a handler doing CPU work on it, the whole process starved), no heartbeat could
be read, however healthy the workers. A check that wakes more than a period late therefore
never kills: it counts every instance as seen now and judges from there, so a worker is
blamed only for silence the watch itself was awake to notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from .supervisor import READY, Supervisor

log = logging.getLogger("omni.supervisor")


class HeartbeatWatch:
    """Last heartbeat per instance, and a periodic check that kills an instance silent past ``timeout``."""

    def __init__(self, supervisor: Supervisor, timeout: float) -> None:
        self.supervisor = supervisor
        self.timeout = timeout
        self._seen: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.oversleeps = 0
        """Checks that woke late (the event loop was blocked) and so judged nobody."""

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._watch())

    def beat(self, instance: str) -> None:
        """A heartbeat (or the ready report) from ``instance``."""
        if self._loop is not None:
            self._seen[instance] = self._loop.time()

    async def _watch(self) -> None:
        assert self._loop is not None
        period = min(1.0, self.timeout / 4)
        checked = self._loop.time()
        while True:
            await asyncio.sleep(period)
            now = self._loop.time()
            overslept = now - checked > 2 * period
            checked = now
            if overslept:  # this loop was blocked: the heartbeats sent meanwhile are still unread
                self.oversleeps += 1
                for name in self._seen:
                    self._seen[name] = now
                continue
            for name, inst in self.supervisor.instances.items():
                if inst.state != READY or inst.worker is None:
                    self._seen.pop(name, None)
                    continue
                last = self._seen.setdefault(name, now)  # ready before its first heartbeat arrived
                if now - last > self.timeout:
                    self._seen.pop(name, None)
                    self.supervisor.kill_unresponsive(name, now - last)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    def describe(self) -> dict[str, Any]:
        return {"timeout_s": self.timeout}
