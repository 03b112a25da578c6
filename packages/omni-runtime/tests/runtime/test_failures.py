"""Failures: a stage error fails only its request, cancel reaches every stage, startup errors."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from omni_runtime import RequestCancelled, RequestFailed, Runtime, StartupError

from .conftest import STAGES_ROOT, LoopThread
from .topologies import single_topology, topology

B = "runtime_stages.broken"


def _wait_for(predicate, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_stage_exception_fails_only_its_request_with_the_stage_message(main_rt: Runtime, loop_thread: LoopThread):
    async def run():
        bad = await main_rt.submit({"mode": "boom", "x": 42})
        good = [await main_rt.submit({"mode": "fan", "x": i}) for i in range(10)]
        outcome = []
        try:
            await bad.result()
        except RequestFailed as exc:
            outcome.append(exc)
        return outcome, [await h.result() for h in good]

    errors, good = loop_thread.run(run())
    assert len(errors) == 1
    error = errors[0]
    assert str(error) == "stage boom (process back): ValueError: bad input 42"
    assert (error.stage, error.process, error.kind) == ("boom", "back", "stage_error")
    assert "raise ValueError" in error.detail
    assert [r["sum"] for r in good] == [5 * i for i in range(10)]
    assert main_rt.health()["healthy"] is True


def test_cancel_aborts_the_request_in_every_stage(main_rt: Runtime, loop_thread: LoopThread, tmp_path: Path):
    async def run():
        handle = await main_rt.submit({"mode": "stream_src", "n": 0, "forever": True, "marker_dir": str(tmp_path)})
        stream = handle.stream()
        first = await stream.__anext__()  # producer (front) and consumer (back) are both running
        await handle.cancel()
        with pytest.raises(RequestCancelled):
            await handle.result()
        return first

    first = loop_thread.run(run())
    assert first["sample_rate"] == 16000
    assert _wait_for(lambda: (tmp_path / "producer-cancelled").exists()), "the producer in process front never saw the cancel"
    assert _wait_for(lambda: (tmp_path / "consumer-cancelled").exists()), "the consumer in process back never saw the cancel"
    assert int((tmp_path / "producer-cancelled").read_text()) == main_rt.instance_pids()["front"]
    assert int((tmp_path / "consumer-cancelled").read_text()) == main_rt.instance_pids()["back"]
    assert set(main_rt.queue_depths().values()) == {0}


def test_cancel_reaches_a_sync_stage_that_polls_ctx_cancelled(main_rt: Runtime, loop_thread: LoopThread, tmp_path: Path):
    async def run():
        handle = await main_rt.submit({"mode": "slow", "tag": "t1", "seconds": 60, "marker_dir": str(tmp_path)})
        while not (tmp_path / "slow-started-t1").exists():
            await asyncio.sleep(0.01)
        await handle.cancel()
        try:
            await handle.result()
        except RequestCancelled as exc:
            return exc

    error = loop_thread.run(run())
    assert error.kind == "cancelled"
    assert _wait_for(lambda: (tmp_path / "slow-cancelled-t1").exists())


def test_factory_error_is_a_startup_error_naming_stage_and_process(loop_thread: LoopThread):
    topo = topology(
        [
            {"name": "fine", "factory": f"{B}:build_ok", "process": "solo", "next": "bad"},
            {"name": "bad", "factory": f"{B}:build_fails", "factory_args": {"path": "/models/x"}, "process": "solo", "terminal": True},
        ]
    )
    rt = Runtime(topo, device="cpu", log=lambda _m: None)
    with pytest.raises(StartupError) as info:
        loop_thread.run(rt.start(), timeout=180)
    error = info.value
    assert (error.stage, error.process) == ("bad", "solo")
    assert str(error) == "stage bad (process solo) failed to start: RuntimeError: cannot load weights from /models/x"
    assert "build_fails" in error.traceback and "Traceback" in error.traceback
    assert not Path(rt.run.path).exists()
    assert rt.health()["healthy"] is False


def test_a_refused_factory_argument_is_a_startup_error_with_its_path_and_no_traceback(loop_thread: LoopThread):
    rt = Runtime(single_topology(f"{B}:build_refuses", factory_args={"threads": 999}), device="cpu", log=lambda _m: None)
    with pytest.raises(StartupError) as info:
        loop_thread.run(rt.start(), timeout=180)
    error = info.value
    assert error.config is not None and error.traceback == ""
    assert [(i.path, i.value, i.rule, i.fix) for i in error.config.issues] == [
        ("stages.only.factory_args.threads", 999, "more threads than this machine has", "set threads to 8 or fewer"),
        ("stages.only.factory_args.threads", 999, "a second, independent problem", "also fix it"),
    ]
    assert str(error) == "stage only (process solo) failed to start: stages.only.factory_args.threads = 999: more threads than this machine has"


def test_a_refused_model_path_names_the_weights_flag_and_its_value(loop_thread: LoopThread):
    rt = Runtime(single_topology(f"{B}:build_refuses"), device="cpu", model_path="/data/ckpt", log=lambda _m: None)
    with pytest.raises(StartupError) as info:
        loop_thread.run(rt.start(), timeout=180)
    assert info.value.config is not None
    assert (info.value.config.path, info.value.config.value) == ("--weights", "/data/ckpt")


def test_missing_factory_module_is_a_startup_error(loop_thread: LoopThread):
    rt = Runtime(single_topology("runtime_stages.no_such_module:build"), device="cpu", log=lambda _m: None)
    with pytest.raises(StartupError) as info:
        loop_thread.run(rt.start(), timeout=180)
    assert (info.value.stage, info.value.process) == ("only", "solo")
    assert "ModuleNotFoundError: No module named 'runtime_stages.no_such_module'" in str(info.value)


def test_startup_timeout_stops_every_process(loop_thread: LoopThread):
    rt = Runtime(single_topology(f"{B}:build_hangs", factory_args={"seconds": 120}), device="cpu", startup_timeout=2.0, log=lambda _m: None)
    with pytest.raises(StartupError) as info:
        loop_thread.run(rt.start(), timeout=180)
    assert info.value.process == "solo"
    assert "startup_timeout=2" in str(info.value)
    assert all(not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE for pid in rt.instance_pids().values() if pid)


def test_sigkill_of_the_parent_leaves_no_orphan(tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (STAGES_ROOT, os.environ.get("PYTHONPATH", "")) if p)}
    parent = subprocess.Popen([sys.executable, "-m", "runtime_stages.parent_script"], stdout=subprocess.PIPE, env=env, text=True)
    try:
        line = parent.stdout.readline()
        assert line, f"the parent process exited early with {parent.wait()}"
        info = json.loads(line)
        pids = list(info["pids"].values())
        assert all(psutil.pid_exists(pid) for pid in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _wait_for(lambda: not any(_alive(pid) for pid in pids)), f"workers outlived the parent: {pids}"
        assert _wait_for(lambda: not Path(info["run_dir"]).exists())
        assert _wait_for(lambda: not [n for n in os.listdir("/dev/shm") if n.startswith(info["shm_prefix"])])
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        parent.stdout.close()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
