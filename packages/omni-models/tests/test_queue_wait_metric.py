"""Queue wait before the first step reaches ``/metrics`` through a real ``omni serve``.

The engine's batch holds one request (``max_batch_size 1``), so of three streamed requests sent
together at least two wait in the engine's queue while another decodes. The scheduler reports
each request's wait when its prefill begins (``StageContext.record_queue_wait``); the runtime
carries it with the stage timings to the parent, which observes
``omni_stage_queue_wait_seconds{model,stage,replica}``.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_deadline_serve import _serve

MODEL = "qwen/qwen3-tts"
TEXT = "Queue behind the others, please, for a little while."


def _stream(url: str) -> int:
    body = json.dumps({"model": MODEL, "input": TEXT, "response_format": "pcm", "stream": True}).encode()
    request = urllib.request.Request(f"{url}/v1/audio/speech", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=180) as response:
        response.read()
        return response.status


def _sample(metrics: str, name: str) -> float | None:
    labels = f'{{model="{MODEL}",replica="0",stage="tts_engine"}}'
    for line in metrics.splitlines():
        if line.startswith(name + labels):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.mark.timeout(420)
def test_requests_queued_behind_a_full_batch_report_their_wait():
    proc, url, lines = _serve(
        "--model", MODEL, "--device", "cpu", "--port", "0", "--stages.tts_engine.factory_args.max_batch_size", "1",
    )
    try:
        with ThreadPoolExecutor(3) as pool:
            assert list(pool.map(lambda _: _stream(url), range(3))) == [200, 200, 200], "".join(lines)
        metrics = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
        assert _sample(metrics, "omni_stage_queue_wait_seconds_count") == 3, metrics
        waited = _sample(metrics, "omni_stage_queue_wait_seconds_sum")
        assert waited is not None and waited > 0
        # the wait is the engine's queue alone, not the stage's whole run: it never reaches the stage's own latency
        stage_total = next(
            float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
            if line.startswith(f'omni_stage_latency_seconds_sum{{model="{MODEL}",stage="tts_engine"}}')
        )
        assert waited < stage_total
        assert "queue_wait" not in "".join(line for line in metrics.splitlines() if line.startswith("omni_stage_latency_seconds"))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


@pytest.mark.timeout(300)
def test_omni_bench_reports_the_queue_wait_of_each_row():
    from e2e_support import omni

    result = omni(
        "bench", "--model", MODEL, "--device", "cpu", "--requests", "3", "--repeat", "1", "--warmup", "0", "--concurrency", "1,3",
        "--text-length", "40", "--json", "--stages.tts_engine.factory_args.max_batch_size", "1",
    )
    assert result.returncode == 0, result.stderr
    rows = {row["concurrency"]: row for row in json.loads(result.stdout)["rows"]}
    assert rows[1]["queue_wait_p50_s"] is not None and rows[1]["queue_wait_p50_s"] >= 0
    # three clients on a batch of one: the median request waits for another to finish
    assert rows[3]["queue_wait_p50_s"] > rows[1]["queue_wait_p50_s"]
    assert rows[3]["queue_wait_p95_s"] >= rows[3]["queue_wait_p50_s"]
