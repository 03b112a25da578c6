"""The README's two-node Ray steps: ``ray start --head``, ``ray start --address`` on a second node, both with
Ray 2.60's token authentication, then ``omni topology`` and ``omni synthesize`` with ``--backend ray --ray-address``
placing the pipeline's processes on both nodes.

Real processes only: two Ray nodes on this machine (each its own raylet, object store and ports,
``--node-ip-address 127.0.0.1``), a private temp dir and private ports so it never joins or disturbs
another cluster, and the ``omni`` CLI in subprocesses. ``ray stop`` would stop every Ray on the
machine, someone else's included, so the nodes are stopped by what marks them as this test's: every
process the two ``ray start`` calls spawned carries a unique environment variable.

Loopback only: every Ray process runs with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (Ray's single-node mode, in which
``--node-ip-address 127.0.0.1`` stays 127.0.0.1 and Ray's servers listen on it alone). With the variable at 1 (Linux's
default) Ray's CLI replaces a loopback ``--address`` and ``--node-ip-address`` by the host's interface address
(``services.resolve_ip_for_localhost``), so the nodes listen on all interfaces and dial that address: traffic outside
127.0.0.0/8, which the machines this runs on (and CI) forbid. ``ray start --address`` refuses to run at 0, so the worker node's ``ray start``
is Ray's own CLI with that one check lifted in the CLI process (``JOIN``); every other process sees 0. A sampler
asserts that every TCP socket of the test's processes stays on loopback for the whole run.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import wave
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)
TESTS = Path(__file__).resolve().parents[1]
MARK = "OMNI_TEST_RAY_START_RUN"
# `ray start` (Ray's own CLI, ray.scripts.scripts:main) with two changes in its own process only: the check that refuses
# `--address` in single-node mode is lifted, and a loopback address stays loopback, as it does in single-node mode
# (without the second, the check's flag makes the CLI dial the host's interface address: the worker then waits on a
# GCS at <host address>:<port> that listens on 127.0.0.1 only, until `ray start` times out).
JOIN = [sys.executable, "-c", "\n".join([
    "import sys",
    "from ray._common.network_utils import get_localhost_ip",
    "from ray._private import ray_constants, services",
    "ray_constants.ENABLE_RAY_CLUSTER = True",
    "services.get_node_ip_address = lambda address=None: get_localhost_ip()",
    "if services.resolve_ip_for_localhost('127.0.0.1') != get_localhost_ip():",  # a Ray that resolves elsewhere
    "    sys.exit('this Ray version resolves 127.0.0.1 another way: the loopback-only join does not hold')",
    "from ray.scripts.scripts import main",
    "sys.argv[0] = 'ray'",
    "main()",
])]
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


def _is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False  # "*" or a name: not provably loopback
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


class LoopbackWatch:
    """Samples every TCP socket of the test's processes once a second: a listener or a connection with an address
    outside 127.0.0.0/8 (or ::1) is recorded. Sampling can miss a socket that lives under a second; it never
    reports one that did not exist."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.seen = 0  # sockets inspected, so an empty record means something was looked at
        self.offending: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="loopback-watch", daemon=True)

    def __enter__(self) -> LoopbackWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def sample(self) -> None:
        import psutil

        for pid in _ours(self.run):
            try:
                proc = psutil.Process(pid)
                sockets_of = getattr(proc, "net_connections", None) or proc.connections  # psutil < 6 has only the latter
                name, sockets = proc.name(), sockets_of(kind="tcp")
            except (psutil.Error, OSError):
                continue
            for sock in sockets:
                self.seen += 1
                ends = [sock.laddr, *([sock.raddr] if sock.raddr else [])]
                if not all(_is_loopback(end.ip) for end in ends):
                    where = " -> ".join(f"{end.ip}:{end.port}" for end in ends)
                    self.offending.append(f"{name} (pid {pid}) {sock.status} {where}")

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self.sample()


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
        # single-node mode keeps every Ray process on 127.0.0.1 (module docstring); JOIN lifts the CLI's check
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        # the actors import omni and the test stages: the same Python environment on every node
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("RAY_ADDRESS", None)
    gcs, dashboard, client, *ports = _free_ports(15)
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--object-store-memory", str(100 << 20),
              "--disable-usage-stats", "--temp-dir", temp_dir]
    head = [ray_cli, "start", "--head", "--port", str(gcs), "--resources", '{"node_a": 4}', "--include-dashboard", "false",
            "--dashboard-port", str(dashboard), *_client_port(client), *common, *_node_ports(ports[:6])]
    worker = [*JOIN, "start", "--address", f"127.0.0.1:{gcs}", "--resources", '{"node_b": 4}', *common, *_node_ports(ports[6:12]),
              "--min-worker-port", str(20000 + gcs % 20000), "--max-worker-port", str(20000 + gcs % 20000 + 100)]
    with LoopbackWatch(run) as watch:
        try:
            for step, command in (("ray start --head", head), ("ray start --address", worker)):
                started = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
                if started.returncode != 0:  # e.g. a sandbox that forbids Ray's ports: a reason, never a silent pass
                    why = f"{step} cannot run here (exit {started.returncode}):\n{started.stdout[-2000:]}\n{started.stderr[-3000:]}"
                    if os.environ.get("OMNI_REQUIRE_RAY"):
                        pytest.fail(why)
                    pytest.skip(why)
            yield {"address": f"127.0.0.1:{gcs}", "env": env, "token": token, "watch": watch}
        finally:
            watch.sample()
            _stop(run)
            shutil.rmtree(temp_dir, ignore_errors=True)
    assert not _ours(run), "processes of the test's Ray nodes outlived the test"
    assert not watch.offending, f"sockets of the test's Ray processes off loopback: {sorted(set(watch.offending))[:20]}"


def _client_port(port: int) -> list[str]:
    """A private Ray Client port where ``ray[client]`` is installed (Ray takes 10001 there by default, which another
    cluster on the machine may hold); none with the minimal ``ray`` of ``omni-runtime[ray]``, which refuses the flag."""
    from ray._private.utils import get_ray_client_dependency_error

    return ["--ray-client-server-port", str(port)] if get_ray_client_dependency_error() is None else []


def _omni(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
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


def test_every_socket_of_both_nodes_stays_on_loopback(two_nodes):
    """Runs last: the sampler has watched both nodes start and serve the tests above."""
    watch = two_nodes["watch"]
    watch.sample()
    assert watch.seen > 0, "no TCP socket of the test's Ray processes was ever seen: the check could not decide"
    assert not watch.offending, sorted(set(watch.offending))[:20]
