"""The parent's view of its instances' states, and a signal for "one of them changed".

Admission waits on it for a restarting process to come back; the request
table asks it which instances are ready to receive a cancel. The supervisor
owns the states; this only reads them, so the parts that read do not need the
supervisor itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..routing import ReplicaChooser
from ..supervision import READY, RESTARTING, STARTING

STATUS_STARTING = "starting"
STATUS_READY = "ready"
STATUS_DEGRADED = "degraded"
STATUS_RESTARTING = "restarting"
STATUS_UNHEALTHY = "unhealthy"


class InstanceWatch:
    """Reads instance states from the supervisor (once there is one) and wakes waiters on a change."""

    def __init__(self) -> None:
        self._supervisor: Any = None
        self._changed = asyncio.Event()

    def attach(self, supervisor: Any) -> None:
        self._supervisor = supervisor

    def state_of(self, name: str) -> str:
        return self._supervisor.instances[name].state if self._supervisor is not None else STARTING

    def is_ready(self, name: str) -> bool:
        return self._supervisor is not None and self.state_of(name) == READY

    def notify(self) -> None:
        """An instance changed state: wake everyone waiting for one."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_change(self, timeout: float) -> None:
        """Return at the next change, or after ``timeout`` seconds."""
        changed = self._changed
        try:
            await asyncio.wait_for(changed.wait(), timeout)
        except asyncio.TimeoutError:
            return


def serving_status(states: dict[str, str], chooser: ReplicaChooser) -> str:
    """A started run's status from its instances' states (``/health``).

    ``ready``: every instance is; ``degraded``: one is down but every process can
    still serve (a replica took over); ``restarting``: a process it needs is down
    and coming back under its restart policy (routine); ``unhealthy``: one is down
    for good (past its restart budget, or stopped), nothing can serve.
    """
    if all(state == READY for state in states.values()):
        return STATUS_READY
    if chooser.can_serve({name: state == READY for name, state in states.items()}):
        return STATUS_DEGRADED
    if chooser.can_serve({name: state in (READY, RESTARTING, STARTING) for name, state in states.items()}):
        return STATUS_RESTARTING
    return STATUS_UNHEALTHY
