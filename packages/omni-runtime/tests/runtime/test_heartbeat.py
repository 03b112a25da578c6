"""A frozen worker (SIGSTOP) is seen by its missing heartbeat: killed, its requests failed at once, restarted."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from omni_runtime import RequestFailed

from .conftest import LoopThread, start_runtime
from .test_supervision import HANG_GUARD_S, _ready_again, _stop, _wait_state
from .topologies import replica_topology

HEARTBEAT_TIMEOUT_S = 3.0
REQUEST_TIMEOUT_S = 120.0
"""Far beyond the heartbeat timeout: a request that waited for its deadline would show."""


def test_a_stopped_worker_is_killed_its_request_fails_fast_and_it_restarts(loop_thread: LoopThread, tmp_path: Path):
    rt = start_runtime(
        loop_thread, replica_topology(max_restarts=2, backoff_s=0.2), heartbeat_timeout=HEARTBEAT_TIMEOUT_S, request_timeout=REQUEST_TIMEOUT_S
    )
    frozen = None
    try:
        pids = rt.instance_pids()

        async def run():
            held = await rt.submit({"hold": True, "marker_dir": str(tmp_path)})
            while not list(tmp_path.iterdir()):  # parked inside a replica of rep
                await asyncio.sleep(0.02)
            os.kill(pids["front"], signal.SIGSTOP)
            began = time.monotonic()
            with pytest.raises(RequestFailed) as info:
                await asyncio.wait_for(held.result(), HANG_GUARD_S)
            failed_after = time.monotonic() - began
            await _wait_state(rt, "front", "restarting")
            health = rt.health()
            new_pid = await _ready_again(rt, "front", pids["front"])
            late = await (await rt.submit({"i": 1})).result()
            return info.value, failed_after, health, new_pid, late

        frozen = pids["front"]
        error, failed_after, health, new_pid, late = loop_thread.run(run(), timeout=150)
        assert error.kind == "process_died"
        assert str(error).startswith("process front sent no heartbeat for ")
        assert "(frozen or blocked) and was killed while the request was in flight" in str(error)
        assert failed_after < REQUEST_TIMEOUT_S / 4  # it failed on the heartbeat, not at its deadline
        assert health["status"] == "restarting" and health["processes"]["front"] == "restarting"
        assert late["seen"][0]["pid"] == new_pid != pids["front"]
        assert rt.supervision()["restarts"] == {("front", "no heartbeat"): 1}
        assert rt.health()["status"] == "ready"
    finally:
        if frozen is not None:
            try:
                os.kill(frozen, signal.SIGCONT)  # killed already when the test passed; never leave one stopped
            except ProcessLookupError:
                pass
        _stop(loop_thread, rt)
