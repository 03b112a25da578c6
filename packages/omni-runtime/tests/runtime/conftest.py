"""Fixtures for runtime tests: a background event loop, shared runtimes, leak checks.

Spawned workers import the test stage factories from ``tests/runtime_stages`` of this
package; ``spawn`` children inherit ``sys.path``, so putting this package's ``tests``
folder on it here is enough (a separately started parent process gets it through PYTHONPATH).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from omni_runtime import Runtime
from omni_runtime.testing import LeakCheck, descendants

STAGES_ROOT = str(Path(__file__).resolve().parents[1])
if STAGES_ROOT not in sys.path:
    sys.path.insert(0, STAGES_ROOT)

from .topologies import main_topology  # noqa: E402


class LoopThread:
    """An event loop on a daemon thread that lives for the whole session.

    Runtimes are started from it, so the workers' parent-death signal (tied
    to the spawning thread) stays armed for as long as the runtime runs.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="test-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = 90.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    lt = LoopThread()
    yield lt
    lt.close()


_SEGMENT = re.compile(r"^omni-[0-9a-f]{8}-(\d+)-")


SHARED_PREFIXES: set[str] = set()
"""Shared-memory prefixes of the session's shared runtime: its pools keep (and reuse) segments
until it shuts down, when its own fixture checks that every one of them is gone."""


def _ignore_foreign(check: LeakCheck) -> None:
    """Ignore segments of live processes outside this test session (another suite or benchmark
    running on the same machine); a segment of ours names one of our workers (dead by now) or us."""
    ours = set(descendants()) | {os.getpid()}
    foreign = set()
    for name in os.listdir("/dev/shm"):
        match = _SEGMENT.match(name)
        if match and int(match.group(1)) not in ours and psutil.pid_exists(int(match.group(1))):
            foreign.add(match.group(1))
    patterns = [re.escape(prefix) for prefix in SHARED_PREFIXES]
    if foreign:
        patterns.append("^omni-[0-9a-f]{8}-(" + "|".join(sorted(foreign)) + ")-")
    if patterns:
        pattern = "|".join(f"^{p}" if not p.startswith("^") else p for p in patterns)
        if check.ignore_shm is not None:
            pattern = f"{pattern}|{check.ignore_shm.pattern}"
        check.ignore_shm = re.compile(pattern)


def assert_no_leaks(check: LeakCheck) -> None:
    _ignore_foreign(check)
    check.assert_clean(wait=15.0)


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[LeakCheck]:
    """Every test: no new /dev/shm segment and no new child process afterwards."""
    check = LeakCheck.start()
    yield check
    assert_no_leaks(check)


def start_runtime(loop_thread: LoopThread, topology: Any, **kwargs: Any) -> Runtime:
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("log", lambda _msg: None)
    rt = Runtime(topology, **kwargs)
    loop_thread.run(rt.start(), timeout=180)
    return rt


@pytest.fixture(scope="session")
def main_rt(loop_thread: LoopThread) -> Iterator[Runtime]:
    """The two-process ``front``/``back`` runtime shared by the tests that leave it healthy."""
    check = LeakCheck.start()
    rt = start_runtime(loop_thread, main_topology())
    SHARED_PREFIXES.add(rt.run.shm_prefix)
    yield rt
    loop_thread.run(rt.shutdown(grace=5.0))
    SHARED_PREFIXES.discard(rt.run.shm_prefix)
    assert_no_leaks(check)
    assert not Path(rt.run.path).exists()
