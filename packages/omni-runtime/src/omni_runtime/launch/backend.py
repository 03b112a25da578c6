"""The seam between the supervisor and the way worker processes are started.

A :class:`Backend` starts one worker for a :class:`WorkerLaunch` and hands back
a :class:`LaunchedWorker` whose ``exited`` future resolves (with an
:class:`ExitInfo`) when that worker is gone, however it ended. The supervisor
above it decides what to start, when to restart and what a death means; a
backend only starts, watches and kills. :mod:`.local` spawns OS processes on
this host; another backend (Ray actors on other nodes) plugs in here without
the supervisor changing.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod

from .spec import ExitInfo, WorkerLaunch


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


class Backend(ABC):
    """Starts workers; one backend per runtime."""

    name: str = "?"

    @abstractmethod
    async def launch(self, launch: WorkerLaunch) -> LaunchedWorker:
        """Start one worker (returns once it is started, not once it is ready)."""

    async def close(self) -> None:  # noqa: B027 - most backends hold nothing to release
        """Release what the backend holds once every worker has exited."""
