"""The parent's view of its instances' states, and a signal for "one of them changed".

Admission waits on it for a restarting process to come back; the request
table asks it which instances are ready to receive a cancel. The supervisor
owns the states; this only reads them, so the parts that read do not need the
supervisor itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..supervision import READY, STARTING


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
