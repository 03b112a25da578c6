"""Fixtures for transport tests.

``no_leaks`` (autouse) is the pattern every multiprocess test folder should
copy: it snapshots ``/dev/shm`` and this process's descendants before the
test and fails the test if a new segment or a child process is still there
afterwards (it waits a few seconds for children that are exiting). It is
built on :class:`omni_runtime.testing.LeakCheck`, so another
folder's conftest only needs the same five lines.

Fixtures that own resources (``run_dir``) depend on ``no_leaks`` so they are
torn down *before* the leak check runs; ``run_dir`` also fails the test if
any segment of its run was still present at teardown, so success paths
cannot hide behind the crash-path cleanup.
"""

from __future__ import annotations

import multiprocessing as mp

import pytest

from omni_runtime.testing import LeakCheck
from omni_runtime.transport import RunDir


@pytest.fixture(autouse=True)
def no_leaks():
    check = LeakCheck.start()
    yield check
    check.assert_clean(wait=10.0)


@pytest.fixture
def run_dir(no_leaks):
    run = RunDir.create()
    yield run
    leftover = run.cleanup()
    assert not leftover, f"segments of the run were still present at teardown: {leftover}"


@pytest.fixture
def spawn_ctx():
    return mp.get_context("spawn")
