"""``omni bench``: the current topology and an alternative, measured side by side.

Run against the espeak reference pipeline (real synthesis, cheap to start), as a
user runs it; invalid alternatives are refused before any process starts.
"""

from __future__ import annotations

import json

import pytest
from e2e_support import omni


@pytest.mark.timeout(300)
def test_bench_measures_current_and_alternative_side_by_side() -> None:
    result = omni(
        "bench",
        "--requests",
        "2",
        "--repeat",
        "1",
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
        assert row["requests_per_s"] > 0 and row["audio_s"] > 0
        assert row["rtf"] == pytest.approx(row["wall_s"] / row["audio_s"], rel=1e-3) and row["audio_s_per_s"] > 0
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
