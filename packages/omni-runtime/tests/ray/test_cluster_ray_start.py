"""The README's two-node Ray steps, run as written: ``ray start --head``, ``ray start --address`` on a
second node, both with Ray 2.60's token authentication, then ``omni topology`` and ``omni synthesize``
with ``--backend ray --ray-address`` placing the pipeline's processes on both nodes.

Real processes only: two Ray nodes on this machine (each its own raylet, object store and ports,
``--node-ip-address 127.0.0.1``), a private temp dir and private ports so it never joins or disturbs
another cluster, and the ``omni`` CLI in subprocesses. ``ray stop`` would stop every Ray on the
machine, someone else's included, so the nodes are stopped by what marks them as this test's: every
process the two ``ray start`` calls spawned carries a unique environment variable.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)
TESTS = Path(__file__).resolve().parents[1]
MARK = "OMNI_TEST_RAY_START_RUN"
PLACEMENT = [  # the reference pipeline split over three processes, on the two nodes
    "--stages.preprocessing.process", "front",
    "--stages.tts_engine.process", "engine",
    "--stages.vocoder.process", "vocoder",
    "--processes.front.ray.resources.node_a", "1",
    "--processes.engine.ray.resources.node_a", "1",
    "--processes.vocoder.ray.resources.node_b", "1",
]


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def _node_ports(ports: list[int]) -> list[str]:
    names = ["--node-manager-port", "--object-manager-port", "--dashboard-agent-grpc-port", "--dashboard-agent-listen-port",
             "--metrics-export-port", "--runtime-env-agent-port"]
    return [arg for name, port in zip(names, ports) for arg in (name, str(port))]


def _ours(run: str) -> list[int]:
    import psutil

    pids = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(MARK) == run:
                pids.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return pids


def _stop(run: str) -> None:
    """What ``ray stop`` does on a node, limited to this test's processes: SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        for pid in _ours(run):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while _ours(run) and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.fixture(scope="module")
def two_nodes():
    ray_cli = shutil.which("ray")
    if ray_cli is None:
        if os.environ.get("OMNI_REQUIRE_RAY"):
            pytest.fail("the ray CLI is not on PATH (pip install 'omni-runtime[ray]')")
        pytest.skip("the ray CLI is not on PATH (pip install 'omni-runtime[ray]')")
    run = secrets.token_hex(8)
    temp_dir = tempfile.mkdtemp(prefix="omni-ray-", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    token = secrets.token_hex(32)  # what `ray get-auth-token --generate` writes to ~/.ray/auth_token
    env = {
        **os.environ,
        MARK: run,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        "RAY_USAGE_STATS_ENABLED": "0",
        # `ray start --address` refuses to run when this is 0 (Ray's single-node mode), so it is Linux's default here
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1",
        # the actors import omni and the test stages: the same Python environment on every node
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("RAY_ADDRESS", None)
    gcs, dashboard, client, *ports = _free_ports(15)
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--object-store-memory", str(100 << 20),
              "--disable-usage-stats", "--temp-dir", temp_dir]
    head = [ray_cli, "start", "--head", "--port", str(gcs), "--resources", '{"node_a": 4}', "--include-dashboard", "false",
            "--dashboard-port", str(dashboard), "--ray-client-server-port", str(client), *common, *_node_ports(ports[:6])]
    worker = [ray_cli, "start", "--address", f"127.0.0.1:{gcs}", "--resources", '{"node_b": 4}', *common, *_node_ports(ports[6:12]),
              "--min-worker-port", str(20000 + gcs % 20000), "--max-worker-port", str(20000 + gcs % 20000 + 100)]
    try:
        for command in (head, worker):
            started = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
            if started.returncode != 0:  # e.g. a sandbox that forbids Ray's ports: a reason, never a silent pass
                why = f"{' '.join(command[1:3])} cannot run here (exit {started.returncode}):\n{started.stdout[-2000:]}\n{started.stderr[-3000:]}"
                if os.environ.get("OMNI_REQUIRE_RAY"):
                    pytest.fail(why)
                pytest.skip(why)
        yield {"address": f"127.0.0.1:{gcs}", "env": env, "token": token}
    finally:
        _stop(run)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert not _ours(run), "processes of the test's Ray nodes outlived the test"


def _omni(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}  # the driver joins on 127.0.0.1, as the README's `omni serve` on a node
    return subprocess.run([sys.executable, "-m", "omni_runtime.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_ray_status_needs_the_token(two_nodes):
    env = two_nodes["env"]
    deadline = time.monotonic() + 60  # `ray status` shows the autoscaler's view, refreshed every few seconds
    while True:
        status = subprocess.run(["ray", "status", "--address", two_nodes["address"]], env=env, capture_output=True, text=True, timeout=120)
        assert status.returncode == 0, status.stderr[-3000:]
        if ("node_a" in status.stdout and "node_b" in status.stdout) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert "node_a" in status.stdout and "node_b" in status.stdout, status.stdout
    wrong = {**env, "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    refused = subprocess.run(["ray", "status", "--address", two_nodes["address"]], env=wrong, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert "InvalidAuthToken" in refused.stdout + refused.stderr


def test_topology_places_processes_on_both_started_nodes(two_nodes, tmp_path):
    result = _omni(two_nodes["env"], "topology", "--backend", "ray", "--ray-address", two_nodes["address"], *PLACEMENT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    table = result.stdout.split("placed on Ray", 1)[1]
    rows = {line.split()[0]: line for line in table.split("\n\n", 1)[0].splitlines()[2:] if line.strip()}
    assert "node_a" in rows["front"] and "node_a" in rows["engine"], table
    assert "node_b" in rows["vocoder"], table
    assert "tcp" in table  # the engine -> vocoder hop crosses nodes


def test_synthesize_serves_a_request_across_both_nodes(two_nodes, tmp_path):
    result = _omni(two_nodes["env"], "synthesize", "Two nodes, one voice.", "-o", "out.wav", "--backend", "ray",
                   "--ray-address", two_nodes["address"], *PLACEMENT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    with wave.open(str(tmp_path / "out.wav")) as wav:
        assert wav.getnframes() > wav.getframerate() // 2  # over half a second of speech


def test_omni_with_a_wrong_token_is_one_error_line(two_nodes, tmp_path):
    wrong = {**two_nodes["env"], "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    result = _omni(wrong, "topology", "--backend", "ray", "--ray-address", two_nodes["address"], cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: --ray-address {two_nodes['address']}: the Ray cluster there refused this process's "
                      "authentication token (RAY_AUTH_MODE=token)"], result.stderr[-3000:]
    assert "RAY_AUTH_TOKEN" in result.stderr and "Traceback" not in result.stderr


def test_instances_asking_together_for_more_than_a_node_offers_fail_at_startup(two_nodes, tmp_path):
    """node_b offers 4 units: two instances asking 3 each never both fit; said at once, not after --startup-timeout."""
    crowded = [*PLACEMENT[:6], "--processes.front.ray.resources.node_b", "3", "--processes.engine.ray.resources.node_b", "3"]
    result = _omni(two_nodes["env"], "topology", "--backend", "ray", "--ray-address", two_nodes["address"], *crowded, cwd=tmp_path)
    assert result.returncode != 0
    assert "instances front, engine need node_b: 6 together, the cluster offers 4" in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
