"""``omni serve --backend ray`` with Higgs-TTS on a real multi-node Ray cluster, as a user runs it.

configs/higgs_tts_ray.yaml pins tts_frontend and pipeline to the node offering
``node_a`` and the vocoder to the one offering ``node_b``. The server is a
separate process joining the cluster by address; the test speaks to it with
the real ``openai`` client and reads ``/metrics``.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
import wave
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENT = ROOT / "configs" / "higgs_tts_ray.yaml"


def _omni_actors() -> dict[str, str]:
    """Live omni actors: name -> the node it runs on."""
    import ray

    out = {}
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry["namespace"] == "omni" and entry["name"].startswith("omni:"):
            actor = ray.get_actor(entry["name"], namespace="omni")
            out[entry["name"]] = ray.get(actor.node.remote(), timeout=30)["node_id"]
    return out


@pytest.fixture
def server(cluster):
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    cmd = [sys.executable, "-m", "omni_runtime.cli", "serve", "--config", str(DEPLOYMENT), "--device", "cpu", "--port", "0",
           "--backend", "ray", "--ray-address", cluster.address, "--startup-timeout", "300"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    url, lines = None, []
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and url is None:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        found = re.search(r"serving .* on (http://127\.0\.0\.1:\d+)", line)
        if found:
            url = found.group(1)
    if url is None:
        proc.kill()
        pytest.fail("omni serve --backend ray did not start:\n" + "".join(lines[-40:]))
    try:
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _metric(text: str, src: str, dst: str, transport: str) -> float:
    """The value of omni_transport_bytes_total for these labels (0 when absent), whatever the label order."""
    for line in text.splitlines():
        if line.startswith("omni_transport_bytes_total{"):
            labels, value = line[len("omni_transport_bytes_total{"):].rsplit("} ", 1)
            found = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            if found == {"src": src, "dst": dst, "transport": transport}:
                return float(value)
    return 0.0


def test_higgs_serves_speech_with_the_vocoder_on_node_b(cluster, server):
    from openai import OpenAI

    url, proc = server
    client = OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=300)
    audio = client.audio.speech.create(model="bosonai/higgs-tts-3-4b", voice="default", input="Hello from two nodes.", response_format="wav")
    with wave.open(io.BytesIO(audio.content)) as wav:
        assert wav.getframerate() == 24_000
        assert wav.getnframes() > 2400  # more than 0.1 s of audio

    # the actors sit on the nodes the deployment file asked for
    placed = {name.rsplit(":", 1)[1]: node for name, node in _omni_actors().items()}
    assert placed == {"tts_frontend": cluster.node_id("node_a"), "pipeline": cluster.node_id("node_a"), "vocoder": cluster.node_id("node_b")}

    # the cross-node hop went over TCP, the same-node hop over IPC (and nothing else)
    metrics = httpx.get(f"{url}/metrics", timeout=30).text
    assert _metric(metrics, "pipeline", "vocoder", "tcp") > 0
    assert _metric(metrics, "pipeline", "vocoder", "shm") == 0
    assert _metric(metrics, "tts_frontend", "pipeline", "ipc") > 0
    assert _metric(metrics, "tts_frontend", "pipeline", "tcp") == 0

    # every actor is gone once the server stopped
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(90) == 0
    assert _omni_actors() == {}
