"""A real ``omni serve`` of a bundled model for the voice-agent tests, and a small WebSocket client.

The servers are the CLI in a subprocess with real stage processes (the helpers of
omni-runtime's serving tests start and stop them and check nothing leaks).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packages" / "omni-runtime" / "tests"))

from serving.conftest import Server, assert_clean_exit, shm_segments, start_server, wait_healthy  # noqa: E402

MODELS = ROOT / "packages" / "omni-models" / "src" / "omni_models"
ESPEAK = MODELS / "espeak" / "pipeline.yaml"
QWEN3 = MODELS / "qwen3_tts" / "pipeline.yaml"
STREAM = "/v1/audio/speech/stream"
API_KEY = "voice-agent-test-key"


@pytest.fixture(scope="module")
def espeak_server() -> Iterator[Server]:
    """The espeak pipeline with an API key (every test here also proves the key is honoured), its vocoder in a
    process of its own so that streaming and cancelling cross a process boundary."""
    before = shm_segments()
    server = start_server("--api-key", API_KEY, "--stages.vocoder.process", "vocoder", config=ESPEAK)
    try:
        wait_healthy(server.url)
        yield server
    finally:
        assert_clean_exit(server, before)


def ws_url(server: Server) -> str:
    return server.url.replace("http://", "ws://", 1) + STREAM


def connect(server: Server, key: str | None = API_KEY, **kwargs: Any) -> Any:
    from websockets.sync.client import connect as ws_connect

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return ws_connect(ws_url(server), additional_headers=headers, open_timeout=30, **kwargs)


def receive(ws: Any, timeout: float = 60.0) -> dict[str, Any]:
    return json.loads(ws.recv(timeout=timeout))


def send(ws: Any, kind: str, **fields: Any) -> None:
    ws.send(json.dumps({"type": kind, **fields}))


def until(ws: Any, kind: str, timeout: float = 60.0, **match: Any) -> list[dict[str, Any]]:
    """Every message up to and including the first of ``kind`` whose fields equal ``match``."""
    seen = []
    while True:
        message = receive(ws, timeout)
        seen.append(message)
        if message["type"] == kind and all(message.get(k) == v for k, v in match.items()):
            return seen


def http_pcm(server: Server, text: str, key: str | None = API_KEY, **fields: Any) -> bytes:
    """What POST /v1/audio/speech answers for ``text`` as raw PCM: the reference for the stream's audio."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = httpx.post(f"{server.url}/v1/audio/speech", json={"input": text, "response_format": "pcm", **fields}, headers=headers, timeout=60)
    assert response.status_code == 200, response.text
    return response.content


def metric(server: Server, name: str, **labels: str) -> float:
    """The sum of a Prometheus sample over the series whose labels include ``labels``."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def same_speech(got: bytes, reference: bytes) -> bool:
    """Whether two renderings of one text are the same speech: libespeak-ng is not bit-exact from call to call
    (a few samples more or less, values off by an LSB), so lengths agree within 2 % and the 20 ms loudness
    envelopes correlate (> 0.95): a lost or swapped word fails both."""
    import numpy as np

    a, b = np.frombuffer(got, "<i2").astype(np.float64), np.frombuffer(reference, "<i2").astype(np.float64)
    if not len(a) or abs(len(a) - len(b)) > 0.02 * len(b):
        return False
    n = min(len(a), len(b)) // 480 * 480
    env_a, env_b = (np.sqrt((x[:n].reshape(-1, 480) ** 2).mean(axis=1)) for x in (a, b))
    return float(np.corrcoef(env_a, env_b)[0, 1]) > 0.95
