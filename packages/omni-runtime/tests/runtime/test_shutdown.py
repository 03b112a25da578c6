"""Orderly shutdown: stop admitting, drain, stop, kill after the grace period, clean up."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psutil
import pytest

from omni_runtime import RequestFailed, RuntimeNotRunning

from .conftest import LoopThread, start_runtime
from .topologies import single_topology


def test_shutdown_drains_in_flight_requests_then_stops(loop_thread: LoopThread, tmp_path: Path):
    rt = start_runtime(loop_thread, single_topology("runtime_stages.basic:build_slow"))
    pid = rt.instance_pids()["solo"]

    async def run():
        handle = await rt.submit({"tag": "d", "seconds": 1.0, "marker_dir": str(tmp_path)})
        while not (tmp_path / "slow-started-d").exists():
            await asyncio.sleep(0.01)
        await rt.shutdown(grace=60.0)
        with pytest.raises(RuntimeNotRunning):
            await rt.submit({"tag": "late"})
        return await handle.result()

    result = loop_thread.run(run())
    assert result["finished"] is True
    assert rt.health() == {"status": "unhealthy", "healthy": False, "processes": {"solo": "stopped"}}
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not Path(rt.run.path).exists()


def test_shutdown_fails_what_is_left_and_kills_a_stuck_process_after_grace(loop_thread: LoopThread):
    rt = start_runtime(loop_thread, single_topology("runtime_stages.broken:build_blocks_loop"))

    async def run():
        handle = await rt.submit({"seconds": 120.0})
        await asyncio.sleep(0.2)
        await rt.shutdown(grace=1.0)
        with pytest.raises(RequestFailed) as info:
            await handle.result()
        return info.value

    error = loop_thread.run(run())
    assert error.kind == "shutdown"
    assert str(error) == "the runtime shut down before the request finished"
    assert rt.health()["processes"] == {"solo": "stopped"}
    assert not Path(rt.run.path).exists()
