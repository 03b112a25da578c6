"""``omni bench`` as a user runs it: the field's metrics (RTF, x real-time, TTFA, requests/s,
per-process RSS), ``--json`` for scripts and ``--plot`` for a figure, against the sine test
pipeline (two real processes; its audio length is an exact function of the text)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from omni_runtime import cli
from omni_runtime.bench.measure import make_row
from omni_runtime.bench.report import render_table
from omni_runtime.bench.workload import RequestSample, percentile, request_data, workload_text

from .conftest import PIPELINE, SAMPLE_RATE, run_omni
from .stages import plan

pytestmark = pytest.mark.timeout(300)


def test_bench_json_reports_rtf_throughput_ttfa_and_rss_per_process(tmp_path):
    figure = tmp_path / "bench.png"
    result = run_omni(
        "bench", "--config", str(PIPELINE), "--requests", "4", "--concurrency", "1,2", "--text-length", "60",
        "--warmup", "1", "--repeat", "1", "--json", "--plot", str(figure), timeout=240,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report["fields"]) >= {"rtf", "audio_s_per_s", "ttfa_p50_s", "requests_per_s", "rss_mib"}
    rows = report["rows"]
    assert [(r["topology"], r["concurrency"]) for r in rows] == [("current", 1), ("current", 2)]
    expected_audio = sum(plan(request_data(60, i, True)["text"], None, 1.0, SAMPLE_RATE)[1] for i in range(4)) / SAMPLE_RATE
    for row in rows:
        assert (row["requests"], row["failed"]) == (4, 0)
        assert row["audio_s"] == pytest.approx(expected_audio, abs=1e-3)
        assert row["rtf"] == pytest.approx(row["wall_s"] / row["audio_s"], rel=1e-3)
        assert row["audio_s_per_s"] == pytest.approx(1 / row["rtf"], rel=1e-2)
        assert row["requests_per_s"] == pytest.approx(4 / row["wall_s"], rel=1e-2)
        assert 0 < row["ttfa_p50_s"] <= row["ttfa_p95_s"] < row["wall_s"]
        assert row["request_rtf_p50"] > 0
        assert sorted(row["rss_mib"]) == ["frontend", "vocoder"] and all(mib > 10 for mib in row["rss_mib"].values())
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 10_000
    assert f"bench: wrote {figure}" in result.stderr


def test_bench_table_names_rtf_and_x_real_time(capsys):
    samples = [RequestSample(ok=True, latency_s=1.0, first_audio_s=0.1 * (i + 1), audio_s=2.0) for i in range(4)]
    current = make_row("current", 1, 8, 80, samples, wall=2.0, startup=1.0, rss={"pipeline": 300.0})
    split = make_row("split", 2, 8, 80, samples[:2] + [RequestSample(ok=False, latency_s=1.0, first_audio_s=None, audio_s=0.0, error="boom")] * 2, wall=1.0, startup=1.0, rss={"a": 200.0, "b": 250.0})
    assert (current.rtf, current.audio_s_per_s, current.requests_per_s) == (0.25, 4.0, 2.0)
    assert current.request_rtf_p50 == 0.5 and current.ttfa_p50_s == pytest.approx(0.25)
    assert (split.rtf, split.audio_s_per_s, split.failed) == (0.25, 4.0, 2)
    table = render_table([current, split])
    header, _, first, second = table.splitlines()[:4]
    assert "RTF" in header and "x real-time" in header and "TTFA p50 ms" in header
    assert "0.250" in first and "4.00" in first and "pipeline=300 (total 300)" in first
    assert "1.00x" in second and "a=200 b=250 (total 450)" in second
    assert "wall seconds per audio second" in table and "failed requests in split c=8: 2; first: boom" in table


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--plot", "figure.txt"], "the figure is written as .png, .svg, .pdf"),
        (["--plot", "/no/such/folder/figure.png"], "its folder must exist"),
        (["--requests", "0", "--warmup", "-1"], "--requests 0"),
    ],
)
def test_bench_usage_mistakes_are_refused_before_anything_starts(capsys, args, message):
    assert cli.main(["bench", "--config", str(PIPELINE), *args]) == 1
    err = capsys.readouterr().err
    assert message in err and "starting" not in err and "Traceback" not in err
    if "--requests" in args:
        assert "--warmup -1" in err  # every mistake at once


def test_bench_plot_without_matplotlib_says_how_to_install_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import now fails as if not installed
    assert cli.main(["bench", "--config", str(PIPELINE), "--plot", str(tmp_path / "f.png")]) == 1
    err = capsys.readouterr().err
    command = err.split("fix:  ", 1)[1].splitlines()[0]
    assert command.startswith("pip install -e '") and command.endswith("/packages/omni-runtime[plot]'")  # works from a clone
    assert (Path(command.split("'")[1].removesuffix("[plot]")) / "pyproject.toml").is_file()


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
