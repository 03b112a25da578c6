"""Audio SLO metrics in ``/metrics``: time to first audio, chunk interval, late chunks (underrun
risk), RTF, labelled by model, terminal stage and replica; a playback clock with known times,
and a streamed request through a real ``omni serve``."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry

from omni_runtime.serving.metrics import AudioSLOMetrics, stream_origin

from .conftest import MODEL_ID
from .test_http_api import _metrics

LABELS = ("m", "vocoder", "1")


def _value(registry: CollectorRegistry, name: str) -> float:
    return registry.get_sample_value(name, dict(zip(("model", "stage", "replica"), LABELS))) or 0.0


def test_a_chunk_that_leaves_after_its_playback_deadline_is_late():
    registry = CollectorRegistry()
    slo = AudioSLOMetrics(registry)
    stream = slo.track(*LABELS, started=10.0)
    # 0.5 s chunks: first at 10.2 (plays to 10.7); 10.6 on time (to 11.2); 11.5 late by 0.3 (resumes, plays to 12.0); 11.9 on time
    for at in (10.2, 10.6, 11.5, 11.9):
        stream.chunk(0.5, now=at)
    stream.finish()
    assert _value(registry, "omni_stream_chunks_total") == 4
    assert _value(registry, "omni_stream_late_chunks_total") == 1
    assert _value(registry, "omni_stream_late_seconds_total") == pytest.approx(0.3)
    assert _value(registry, "omni_stream_time_to_first_audio_seconds_sum") == pytest.approx(0.2)
    assert _value(registry, "omni_stream_chunk_interval_seconds_count") == 3
    assert _value(registry, "omni_stream_chunk_interval_seconds_sum") == pytest.approx(1.7)
    assert _value(registry, "omni_stream_rtf_sum") == pytest.approx(1.9 / 2.0)


def test_the_origin_is_the_terminal_stage_and_its_replica():
    from omni_compiler.compiler import compile_file

    from .conftest import PIPELINE

    topology = compile_file(str(PIPELINE))
    assert stream_origin(topology, {"frontend", "vocoder"}) == ("vocoder", "0")
    assert stream_origin(None, ()) == ("unknown", "0")


def test_streamed_requests_are_measured_in_metrics(server):
    labels = (("model", MODEL_ID), ("replica", "0"), ("stage", "vocoder"))
    before = _metrics(server.url)
    chunks = 0
    with httpx.stream("POST", f"{server.url}/v1/audio/speech", json={"model": MODEL_ID, "input": "measure this stream please", "voice": "alloy", "response_format": "pcm", "stream": True}, timeout=60) as response:
        assert response.status_code == 200
        for _ in response.iter_raw():
            chunks += 1
    after = _metrics(server.url)

    def grew(name: str) -> float:
        return after.get((name, labels), 0) - before.get((name, labels), 0)

    assert grew("omni_stream_time_to_first_audio_seconds_count") == 1
    assert grew("omni_stream_rtf_count") == 1
    sent = grew("omni_stream_chunks_total")
    assert sent >= 2 and grew("omni_stream_chunk_interval_seconds_count") == sent - 1
    assert 0 <= grew("omni_stream_late_chunks_total") <= sent - 1
    assert ("omni_stream_late_seconds_total", labels) in after
