"""``omni bench``: the current topology and an alternative, measured side by side.

Run against the espeak reference pipeline (real synthesis, cheap to start), as a
user runs it; invalid alternatives are refused before any process starts.
"""

from __future__ import annotations

import json

import pytest
from e2e_support import omni

from omni_runtime.workload_bench import Row, percentile, render_table, workload_text


@pytest.mark.timeout(300)
def test_bench_measures_current_and_alternative_side_by_side() -> None:
    result = omni(
        "bench",
        "--requests",
        "2",
        "--concurrency",
        "1,2",
        "--text-length",
        "60",
        "--device",
        "cpu",
        "--format",
        "json",
        "--alt",
        "split=--stages.vocoder.process vocoder",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rows = report["rows"]
    assert [(r["topology"], r["concurrency"]) for r in rows] == [("current", 1), ("current", 2), ("split", 1), ("split", 2)]
    for row in rows:
        assert (row["requests"], row["failed"], row["text_chars"]) == (2, 0, 60)
        assert row["requests_per_s"] > 0 and row["realtime_factor"] > 0 and row["audio_s"] > 0
        assert 0 < row["ttfa_p50_s"] <= row["ttfa_p95_s"]
        assert all(mib > 10 for mib in row["rss_mib"].values())
    assert {r["topology"]: (r["processes"], sorted(r["rss_mib"])) for r in rows} == {
        "current": (1, ["pipeline"]),
        "split": (2, ["pipeline", "vocoder"]),
    }


def test_invalid_alternative_is_refused_before_anything_starts() -> None:
    result = omni("bench", "--requests", "1", "--alt", "bad=--stages.nope.process x", timeout=60)
    assert result.returncode == 1
    assert "--alt bad: stages.nope" in result.stderr
    assert "Traceback" not in result.stderr and "starting" not in result.stderr


def test_forbidden_split_as_an_alternative_is_refused_with_the_models_reason() -> None:
    result = omni("bench", "--model", "qwen/qwen3-tts", "--alt", "engine=--stages.tts_engine.process engine", timeout=60)
    assert result.returncode == 1
    assert "the edge preprocessing -> tts_engine must stay inside one OS process" in result.stderr
    assert "_PREPARED_REQUESTS" in result.stderr


def test_workload_text_is_deterministic_and_about_the_requested_length() -> None:
    for length in (20, 80, 400):
        text = workload_text(length, 3)
        assert text == workload_text(length, 3)
        assert length <= len(text) <= length + 30 and text.endswith(".")
    assert workload_text(80, 0) != workload_text(80, 1)


def test_percentile_interpolates() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 95) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)


def test_table_shows_ratios_against_the_current_topology() -> None:
    common = {"text_chars": 80, "requests": 4, "failed": 0, "wall_s": 1.0, "ttfa_p50_s": 0.1, "ttfa_p95_s": 0.2, "audio_s": 4.0, "startup_s": 1.0}
    rows = [
        Row(topology="current", processes=1, concurrency=8, requests_per_s=2.0, realtime_factor=4.0, rss_mib={"pipeline": 300.0}, **common),
        Row(topology="split", processes=2, concurrency=8, requests_per_s=3.0, realtime_factor=6.0, rss_mib={"a": 200.0, "b": 250.0}, **common),
    ]
    table = render_table(rows)
    lines = table.splitlines()
    assert "RTF (audio s/s)" in lines[0] and "TTFA p50 ms" in lines[0]
    assert "1.50x" in lines[3] and "a=200 b=250 (total 450)" in lines[3]
    assert "audio seconds produced per wall-clock second" in table
