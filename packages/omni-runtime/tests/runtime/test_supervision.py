"""Supervision with real spawned processes: SIGTERM/SIGKILL of one worker, restarts, the restart
budget, a replica down while the other serves, deadlines, and back-pressure across processes."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from omni_runtime import RequestFailed, Runtime
from omni_runtime.flow import CHUNK_WINDOW

from .conftest import LoopThread, start_runtime
from .topologies import replica_topology

HANG_GUARD_S = 60.0  # bounds awaits so a regression fails instead of hanging the suite (not a timing assertion)


async def _wait_state(rt: Runtime, instance: str, state: str) -> None:
    async def poll() -> None:
        while rt.health()["processes"][instance] != state:
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), HANG_GUARD_S)


async def _ready_again(rt: Runtime, instance: str, old_pid: int) -> int:
    """Wait for ``instance`` to be ready under a new pid; returns it."""

    async def poll() -> int:
        while True:
            pid = rt.instance_pids()[instance]
            if pid != old_pid and rt.health()["processes"][instance] == "ready":
                return pid
            await asyncio.sleep(0.02)

    return await asyncio.wait_for(poll(), HANG_GUARD_S)


def _stop(loop_thread: LoopThread, rt: Runtime) -> None:
    loop_thread.run(rt.shutdown(grace=5.0))
    assert not Path(rt.run.path).exists()


def test_sigterm_to_one_worker_restarts_only_it_and_the_run_stays_whole(loop_thread: LoopThread):
    rt = start_runtime(loop_thread, replica_topology(max_restarts=3, backoff_s=0.2))
    try:
        pids = rt.instance_pids()
        segments_before = set(os.listdir("/dev/shm"))

        async def run():
            os.kill(pids["rep@r0"], signal.SIGTERM)
            # while rep@r0 finishes its requests, stops and restarts, every request succeeds:
            # rep@r1 serves, and rep@r0 takes no new request once its SIGTERM is reported
            handles = [await rt.submit({"i": i}) for i in range(8)]
            results = [await h.result() for h in handles]
            new_pid = await _ready_again(rt, "rep@r0", pids["rep@r0"])
            after = [await (await rt.submit({"i": i})).result() for i in range(4)]
            return results, new_pid, after

        results, new_pid, after = loop_thread.run(run(), timeout=120)
        assert len(results) == 8 and all(r["seen"][0]["pid"] == pids["front"] for r in results)
        assert {r["seen"][1]["pid"] for r in after} <= {new_pid, pids["rep@r1"]}
        # only that worker was replaced; the run directory and the others' segments are intact
        assert rt.instance_pids()["front"] == pids["front"] and rt.instance_pids()["rep@r1"] == pids["rep@r1"]
        assert not psutil.pid_exists(pids["rep@r0"]) or psutil.Process(pids["rep@r0"]).status() == psutil.STATUS_ZOMBIE
        assert Path(rt.run.path).is_dir()
        ours = {n for n in segments_before if n.startswith(rt.run.shm_prefix) and f"-{pids['rep@r0']}-" not in n}
        assert ours <= set(os.listdir("/dev/shm"))
        assert rt.supervision()["restarts"] == {("rep@r0", "SIGTERM"): 1}
        assert rt.health()["status"] == "ready"
    finally:
        _stop(loop_thread, rt)


def test_sigkill_fails_in_flight_at_once_and_the_restarted_process_serves(loop_thread: LoopThread, tmp_path: Path):
    rt = start_runtime(loop_thread, replica_topology(max_restarts=2, backoff_s=0.5))
    try:
        pids = rt.instance_pids()

        async def run():
            held = await rt.submit({"hold": True, "marker_dir": str(tmp_path)})
            while not list(tmp_path.iterdir()):  # parked inside rep_a
                await asyncio.sleep(0.02)
            os.kill(pids["front"], signal.SIGKILL)
            with pytest.raises(RequestFailed) as info:
                await asyncio.wait_for(held.result(), HANG_GUARD_S)
            await _wait_state(rt, "front", "restarting")
            states = rt.health()
            # the only entry process is down: a new request waits for the restart instead of failing
            late = await (await rt.submit({"i": 1})).result()
            return info.value, states, late

        error, states, late = loop_thread.run(run(), timeout=120)
        assert error.kind == "process_died"
        assert str(error) == "process front was killed by SIGKILL while the request was in flight"
        assert states["status"] == "restarting" and states["processes"]["front"] == "restarting"  # routine: it comes back (issue 21)
        new_front = rt.instance_pids()["front"]
        assert new_front != pids["front"] and late["seen"][0]["pid"] == new_front
        stats = rt.supervision()
        assert stats["restarts"] == {("front", "SIGKILL"): 1}
        assert [name for name, _ in stats["ready_seconds"]].count("front") == 2  # first start and the restart
        assert rt.health()["status"] == "ready"
    finally:
        _stop(loop_thread, rt)


def test_past_the_restart_budget_the_process_stays_dead_and_requests_fail_fast(loop_thread: LoopThread):
    rt = start_runtime(loop_thread, replica_topology(max_restarts=1, backoff_s=0.1))
    try:

        async def run():
            first = rt.instance_pids()["front"]
            os.kill(first, signal.SIGKILL)
            second = await _ready_again(rt, "front", first)
            os.kill(second, signal.SIGKILL)
            await _wait_state(rt, "front", "dead")
            began = time.monotonic()
            with pytest.raises(RequestFailed) as info:
                await rt.submit({"i": 0})
            return info.value, time.monotonic() - began

        error, _seconds = loop_thread.run(run(), timeout=120)
        assert error.kind == "unavailable"
        assert str(error) == "process front is not running; see health()"
        health = rt.health()
        assert health["status"] == "unhealthy" and health["healthy"] is False
        assert health["processes"] == {"front": "dead", "rep@r0": "ready", "rep@r1": "ready"}
        assert rt.supervision()["restarts"] == {("front", "SIGKILL"): 1}
    finally:
        _stop(loop_thread, rt)


def test_a_replica_down_leaves_the_runtime_degraded_and_the_other_replica_serves(loop_thread: LoopThread):
    rt = start_runtime(loop_thread, replica_topology(max_restarts=1, backoff_s=3.0))
    try:
        pids = rt.instance_pids()

        async def run():
            os.kill(pids["rep@r0"], signal.SIGKILL)
            await _wait_state(rt, "rep@r0", "restarting")
            health = rt.health()
            handles = [await rt.submit({"i": i}) for i in range(6)]
            results = [await h.result() for h in handles]
            await _ready_again(rt, "rep@r0", pids["rep@r0"])
            return health, handles, results

        health, handles, results = loop_thread.run(run(), timeout=120)
        assert health["status"] == "degraded"
        assert health["processes"] == {"front": "ready", "rep@r0": "restarting", "rep@r1": "ready"}
        assert all(h.binding == {"rep": 1} for h in handles)
        assert all(r["seen"][1]["pid"] == pids["rep@r1"] for r in results)
        assert rt.health()["status"] == "ready"
    finally:
        _stop(loop_thread, rt)


def test_deadline_fails_the_request_and_cancels_it_in_every_stage(main_rt: Runtime, loop_thread: LoopThread, tmp_path: Path):
    async def run():
        handle = await main_rt.submit({"mode": "stream_src", "n": 0, "forever": True, "marker_dir": str(tmp_path)}, timeout=1.5)
        with pytest.raises(RequestFailed) as info:
            await asyncio.wait_for(handle.result(), HANG_GUARD_S)
        return info.value

    error = loop_thread.run(run())
    assert error.kind == "deadline"
    assert "deadline of 1.5 s" in str(error)
    deadline = time.monotonic() + 20
    while not ((tmp_path / "producer-cancelled").exists() and (tmp_path / "consumer-cancelled").exists()):
        assert time.monotonic() < deadline, "a stage kept working past the request's deadline"
        time.sleep(0.02)
    pids = main_rt.instance_pids()
    assert int((tmp_path / "producer-cancelled").read_text()) == pids["front"]
    assert int((tmp_path / "consumer-cancelled").read_text()) == pids["back"]
    assert set(main_rt.queue_depths().values()) == {0}


def test_a_fast_producer_waits_for_a_slow_consumer_in_another_process(main_rt: Runtime, loop_thread: LoopThread):
    count = 6 * CHUNK_WINDOW

    async def run():
        handle = await main_rt.submit({"mode": "pace_src", "n": count})
        return await asyncio.wait_for(handle.result(), HANG_GUARD_S)

    result = loop_thread.run(run())
    taken = [t for _, t in sorted(result["taken"])]
    returned = result["emit_returned"]
    assert len(taken) == len(returned) == count
    # Emit k can only return once the consumer took chunk k - window: at most CHUNK_WINDOW chunks
    # are ever sent and not taken, so the consumer's queue stays bounded however fast the producer is.
    # The credit is granted when the channel hands chunk j to the consumer's thread, a moment before
    # that thread timestamps it, but after it timestamped chunk j - 1 (it asks for j only then):
    # so emit k returns after the consumer's timestamp of chunk k - window - 1.
    for k in range(CHUNK_WINDOW + 1, count):
        assert returned[k] >= taken[k - CHUNK_WINDOW - 1], f"chunk {k} was emitted before chunk {k - CHUNK_WINDOW - 1} was taken"
    # and the producer did run ahead while it had credit (the bound is a window, not lock-step)
    assert returned[CHUNK_WINDOW - 2] < taken[CHUNK_WINDOW // 2]
