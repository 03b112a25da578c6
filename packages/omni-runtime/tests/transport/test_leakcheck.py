"""The leak check itself must be able to fail, or every other test proves nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from omni_runtime.testing import LeakCheck
from omni_runtime.transport import ShmPool
from omni_runtime.transport.shm import SHM_DIR


def test_detects_a_new_segment_and_a_leftover_child(run_dir):
    check = LeakCheck.start()
    pool = ShmPool(run_dir.shm_prefix, budget_bytes=1 << 20)
    pool.acquire(4096).cancel()
    stray = os.path.join(SHM_DIR, "omni-leakcheck-selftest")
    open(stray, "wb").close()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        new_shm, kids = check.leaks()
        assert new_shm == sorted([stray.rsplit("/", 1)[1], *pool.segment_names()])
        assert list(kids) == [proc.pid] and "time.sleep(60)" in kids[proc.pid]
        with pytest.raises(AssertionError, match="leaked /dev/shm segments.*leftover child process"):
            check.assert_clean(wait=0.2)
    finally:
        proc.kill()
        proc.wait()
        os.unlink(stray)
        pool.close()
    check.assert_clean(wait=5)


def test_segments_of_other_live_processes_are_not_ours(run_dir):
    # A pool segment named for a live process outside our tree (pid 1) belongs
    # to another session on this machine; one of a dead pid is a crash leak.
    check = LeakCheck.start()
    foreign = os.path.join(SHM_DIR, f"{run_dir.shm_prefix}1-0")
    dead = os.path.join(SHM_DIR, f"{run_dir.shm_prefix}999999999-0")
    for path in (foreign, dead):
        open(path, "wb").close()
    try:
        assert check.leaks()[0] == [dead.rsplit("/", 1)[1]]
    finally:
        os.unlink(foreign)
        os.unlink(dead)
