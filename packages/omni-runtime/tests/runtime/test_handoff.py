"""Handoffs: the identical object inside one process, exact bytes across processes."""

from __future__ import annotations

import os
import time

import torch

from runtime_stages.basic import make_values

from .conftest import LoopThread


async def _run(rt, data):
    handle = await rt.submit(data)
    return handle, await handle.result()


def _raw(t: torch.Tensor) -> bytes:
    return bytes(t.contiguous().reshape(-1).view(torch.uint8).tolist())


def _assert_same_values(got, expected, path="values"):
    assert type(got) is type(expected), f"{path}: {type(got).__name__} != {type(expected).__name__}"
    if isinstance(expected, torch.Tensor):
        assert got.dtype == expected.dtype and got.shape == expected.shape, path
        assert _raw(got) == _raw(expected), path
    elif isinstance(expected, dict):
        assert sorted(got) == sorted(expected), path
        for key in expected:
            _assert_same_values(got[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), path
        for i, (g, e) in enumerate(zip(got, expected)):
            _assert_same_values(g, e, f"{path}[{i}]")
    else:
        assert got == expected, path


def test_in_process_handoff_passes_the_identical_object(main_rt, loop_thread: LoopThread, tmp_path):
    _, result = loop_thread.run(_run(main_rt, {"mode": "produce", "seed": 1, "marker_dir": str(tmp_path)}))
    # produce -> consume_local share process "front": the consumer got the producer's very objects
    assert result["same_object"] == {"payload": True, "data": True, "f32": True, "pid": True}


def test_cross_process_handoff_carries_exact_bytes_of_every_type(main_rt, loop_thread: LoopThread, tmp_path):
    _handle, result = loop_thread.run(_run(main_rt, {"mode": "produce", "seed": 7, "marker_dir": str(tmp_path)}))
    pids = main_rt.instance_pids()
    assert result["producer_pid"] == pids["front"]
    assert result["cross_pid"] == pids["back"] != pids["front"]
    _assert_same_values(result["values"], make_values(7))
    assert result["values"]["bf16"].dtype == torch.bfloat16
    assert isinstance(result["values"]["nested"]["tuple"], tuple)


def test_stage_code_sees_logical_names_and_timings_cover_the_path(main_rt, loop_thread: LoopThread, tmp_path):
    handle, result = loop_thread.run(_run(main_rt, {"mode": "produce", "seed": 2, "marker_dir": str(tmp_path)}))
    assert result["cross_process_name"] == "back"
    assert result["trace"] == [["router", "front", main_rt.instance_pids()["front"]]]
    assert set(handle.stage_timings) == {"router", "produce", "consume_local", "cross"}
    assert all(seconds >= 0 for seconds in handle.stage_timings.values())


def test_factory_injection_by_signature_and_cpu_device(main_rt, loop_thread: LoopThread):
    _, result = loop_thread.run(_run(main_rt, {"mode": "inj_explicit"}))
    # GPU-declared stage (gpu: 0) under device="cpu": runs on the CPU, told so
    assert result["explicit"] == {
        "label": "L", "device": "cpu", "stage_name": "inj_explicit", "gpu_id": None, "model_path": None,
        "tp_rank": None, "tp_size": 1, "ctx_device": "cpu",
    }
    # a **kwargs factory receives its factory_args and none of the injected values
    assert result["kwargs_factory_got"] == ["extra"]
    # the stage's env is set in its process before the factory module is imported
    assert result["env"] == result["env_at_import"] == "set-by-config"
    assert os.environ.get("OMNI_TEST_STAGE_ENV") is None


def test_many_concurrent_requests_each_get_their_own_result(main_rt, loop_thread: LoopThread, tmp_path):
    async def many():
        handles = [await main_rt.submit({"mode": "fan", "x": i}) for i in range(40)]
        return [await h.result() for h in handles]

    results = loop_thread.run(many())
    assert [r["sum"] for r in results] == [5 * i for i in range(40)]
    assert set(main_rt.queue_depths().values()) == {0}
    assert os.getpid() not in main_rt.instance_pids().values()


def test_large_tensors_cross_through_shared_memory_with_exact_bytes(main_rt, loop_thread: LoopThread, tmp_path):
    # 4 Mi float32 = 16 MiB: over the 1 MiB threshold, so front -> back -> parent go through /dev/shm
    _, result = loop_thread.run(_run(main_rt, {"mode": "produce", "seed": 11, "big": 4 << 20, "marker_dir": str(tmp_path)}))
    _assert_same_values(result["values"], make_values(11, 4 << 20))


def test_tp_rank_0_takes_the_payload_for_its_group_and_continues(main_rt, loop_thread: LoopThread, tmp_path):
    # the ranks formed one torch.distributed group at start-up; rank 0 schedules for all of them,
    # so only it receives requests (rank 1 follows rank 0's broadcasts in engines that shard)
    _, result = loop_thread.run(_run(main_rt, {"mode": "tp_stage", "marker_dir": str(tmp_path)}))
    pids = main_rt.instance_pids()
    assert int((tmp_path / "tp-rank-0").read_text()) == pids["tp_tp0"]
    time.sleep(0.5)
    assert not (tmp_path / "tp-rank-1").exists()
    assert result == {
        "rank": 0, "size": 2, "ctx_rank": 0, "process_name": "tp", "process_fraction": 0.5, "pid": pids["tp_tp0"],
        "group": ["tp_stage", 0, 2, "gloo"],
    }
    groups = main_rt.health()["tp_groups"]
    assert groups["tp_stage"]["state"] == "ready"
    assert [(r["rank"], r["instance"], r["state"]) for r in groups["tp_stage"]["ranks"]] == [(0, "tp_tp0", "ready"), (1, "tp_tp1", "ready")]
    from omni_runtime.serving.page import topology_state  # what /v1/topology serves and the page draws

    live = topology_state(main_rt)["live"]
    assert live["tp_groups"] == groups
    assert live["instances"]["tp_tp1"]["tp"] == {"group": "tp_stage", "rank": 1, "size": 2, "group_state": "ready"}
