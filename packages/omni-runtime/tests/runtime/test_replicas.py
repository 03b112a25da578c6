"""Replicas: one replica per request, kept across every stage of the process; worker death."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
from pathlib import Path

import pytest

from omni_runtime import RequestFailed, Runtime
from omni_runtime.routing import ReplicaChooser, Router
from omni_runtime.testing import LeakCheck

from .conftest import SHARED_PREFIXES, LoopThread, assert_no_leaks, start_runtime
from .topologies import replica_topology


@pytest.fixture(scope="module")
def replica_rt(loop_thread: LoopThread):
    """Shared by this module's tests, in file order: the last one kills two of its processes."""
    check = LeakCheck.start()
    rt = start_runtime(loop_thread, replica_topology())
    SHARED_PREFIXES.add(rt.run.shm_prefix)
    yield rt
    loop_thread.run(rt.shutdown(grace=5.0))
    SHARED_PREFIXES.discard(rt.run.shm_prefix)
    assert_no_leaks(check)
    assert not Path(rt.run.path).exists()


def test_each_request_keeps_one_replica_and_round_robin_balances(replica_rt: Runtime, loop_thread: LoopThread):
    pids = replica_rt.instance_pids()

    async def run():
        handles = [await replica_rt.submit({"i": i}) for i in range(40)]
        return handles, await asyncio.gather(*(h.result() for h in handles))

    handles, results = loop_thread.run(run())
    per_replica = collections.Counter()
    for handle, result in zip(handles, results):
        entry, rep_a, rep_b = result["seen"]
        assert [s["stage"] for s in result["seen"]] == ["entry", "rep_a", "rep_b"]
        # stage code sees the logical process name, never rep@r0 / rep@r1
        assert [s["process"] for s in result["seen"]] == ["front", "rep", "rep"]
        assert entry["pid"] == pids["front"]
        # sticky: both stages of process "rep" ran in the same replica, the one bound at admission
        assert rep_a["pid"] == rep_b["pid"] == pids[f"rep@r{handle.binding['rep']}"]
        per_replica[rep_a["pid"]] += 1
    assert per_replica == {pids["rep@r0"]: 20, pids["rep@r1"]: 20}
    assert replica_rt.queue_depths() == {"front": 0, "rep@r0": 0, "rep@r1": 0}


def test_sigkill_of_a_replica_fails_its_requests_and_health_turns_unhealthy(replica_rt: Runtime, loop_thread: LoopThread, tmp_path: Path):
    pids = replica_rt.instance_pids()

    async def run():
        held = [await replica_rt.submit({"hold": True, "marker_dir": str(tmp_path)}) for _ in range(6)]
        on_r0 = [h for h in held if h.binding["rep"] == 0]
        on_r1 = [h for h in held if h.binding["rep"] == 1]
        while len(list(tmp_path.iterdir())) < len(held):  # every request is parked inside rep_a
            await asyncio.sleep(0.02)
        assert replica_rt.queue_depths()["rep@r0"] == len(on_r0)
        os.kill(pids["rep@r0"], signal.SIGKILL)
        failures = []
        for handle in on_r0:
            with pytest.raises(RequestFailed) as info:
                await asyncio.wait_for(handle.result(), 30)  # a hang guard, not a timing assertion
            failures.append(info.value)
        health = replica_rt.health()
        # new requests avoid the dead replica
        fresh = [await replica_rt.submit({"i": i}) for i in range(4)]
        fresh_results = [await h.result() for h in fresh]
        for handle in on_r1:
            await handle.cancel()
        # a dead process that is not replicated: new requests fail at once instead of hanging
        os.kill(pids["front"], signal.SIGKILL)
        while replica_rt.health()["processes"]["front"] != "dead":
            await asyncio.sleep(0.01)
        with pytest.raises(RequestFailed) as info:
            await replica_rt.submit({"i": 0})
        return failures, health, fresh, fresh_results, info.value

    failures, health, fresh, fresh_results, unavailable = loop_thread.run(run())
    assert failures
    for error in failures:
        assert error.kind == "process_died"
        assert str(error) == "process rep@r0 was killed by SIGKILL while the request was in flight"
    assert health == {"status": "degraded", "healthy": False, "processes": {"front": "ready", "rep@r0": "dead", "rep@r1": "ready"}}
    assert all(h.binding == {"rep": 1} for h in fresh)
    assert all(r["seen"][1]["pid"] == pids["rep@r1"] for r in fresh_results)
    assert unavailable.kind == "unavailable"
    assert str(unavailable) == "process front is not running; see health()"


def test_least_loaded_picks_the_replica_with_fewer_in_flight_requests():
    router = Router(replica_topology())
    chooser = ReplicaChooser(router, "least_loaded")
    alive = {"front": True, "rep@r0": True, "rep@r1": True}
    assert chooser.choose({"rep@r0": 3, "rep@r1": 1}, alive) == {"rep": 1}
    assert chooser.choose({"rep@r0": 0, "rep@r1": 1}, alive) == {"rep": 0}
    assert chooser.choose({"rep@r0": 0, "rep@r1": 5}, {**alive, "rep@r0": False}) == {"rep": 1}
    assert chooser.choose({}, {**alive, "rep@r0": False, "rep@r1": False}) is None


def test_round_robin_skips_a_dead_replica_and_unknown_policies_are_rejected():
    router = Router(replica_topology())
    chooser = ReplicaChooser(router)
    alive = {"front": True, "rep@r0": True, "rep@r1": True}
    assert [chooser.choose({}, alive)["rep"] for _ in range(4)] == [0, 1, 0, 1]
    assert [chooser.choose({}, {**alive, "rep@r1": False})["rep"] for _ in range(3)] == [0, 0, 0]
    with pytest.raises(ValueError, match="replica_policy must be one of round_robin, least_loaded, got 'random'"):
        ReplicaChooser(router, "random")
