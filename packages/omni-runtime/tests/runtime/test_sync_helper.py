"""``Runtime.running``: the blocking helper, on a GPU-declared stage with fraction enforcement opted in."""

from __future__ import annotations

import torch

from omni_runtime import Runtime

from .topologies import single_topology


def test_running_synthesize_joins_streamed_audio_and_enforcement_skips_without_cuda():
    topo = single_topology("runtime_stages.basic:build_tone", gpu=0, runtime={"resources": {"total_gpu_memory_fraction": 0.25}})
    with Runtime.running(topo, enforce_memory_fraction=True, log=lambda _m: None) as rt:
        result = rt.synthesize({"text": "hi"})
        assert rt.health()["healthy"] is True
    # device=None: the GPU-declared stage is told cuda:0 (it never touches CUDA, so it runs anywhere);
    # with no CUDA device the worker skips set_per_process_memory_fraction instead of failing
    assert result["device"] == "cuda:0"
    assert result["fraction"] == 0.25
    assert result["sample_rate"] == 16000
    expected = torch.cat([torch.full((160,), (i + 1) / 10.0) for i in range(3)])
    assert torch.equal(result["audio"], expected)
    assert rt.health() == {"status": "unhealthy", "healthy": False, "processes": {"solo": "stopped"}}
