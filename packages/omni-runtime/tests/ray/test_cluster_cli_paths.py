"""The Ray paths of the README as a newcomer runs them, through the ``omni`` CLI in a subprocess:
``--ray-address`` with no cluster there is one error line (exit 1) after a bounded connect, and
``omni topology --backend ray`` on a CPU machine places a GPU-declaring pipeline without GPUs
(``--device auto`` means the same as for ``omni serve``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)
TESTS = Path(__file__).resolve().parents[1]
GPU_PIPELINE = """\
name: test/gpu-declared
stages:
  - name: frontend
    factory: serving.stages:build_frontend
    next: vocoder
    process: frontend
  - name: vocoder
    factory: serving.stages:build_sine_vocoder
    terminal: true
    process: vocoder
    gpu: 0
process_local_edges: []
"""


def _omni(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    return subprocess.run([sys.executable, "-m", "omni_runtime.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=240)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_ray_address_with_no_cluster_is_one_error_line(tmp_path):
    address = f"127.0.0.1:{_free_port()}"
    result = _omni("synthesize", "hi", "-o", "x.wav", "--backend", "ray", "--ray-address", address, cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: --ray-address {address}: no Ray cluster answers there (Connection refused)"]
    assert "Traceback" not in result.stderr and "fix:" in result.stderr
    assert not (tmp_path / "x.wav").exists()


def test_topology_on_ray_places_a_gpu_pipeline_without_gpus_on_a_cpu_machine(tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: auto keeps the declared placement")
    (tmp_path / "p.yaml").write_text(GPU_PIPELINE)
    result = _omni("topology", "--config", "p.yaml", "--backend", "ray", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "running every stage on the CPU" in result.stderr
    table = result.stdout.split("placed on Ray", 1)[1].split("\n\n", 1)[0]
    rows = {line.split()[0]: line for line in table.splitlines()[2:] if line.strip()}
    assert set(rows) >= {"frontend", "vocoder"}
    assert all(line.rstrip().endswith("-") for name, line in rows.items() if name in ("frontend", "vocoder"))  # no GPU mapped
