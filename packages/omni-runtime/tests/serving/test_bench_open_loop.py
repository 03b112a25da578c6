"""``omni bench`` open loop: seeded Poisson arrivals, a listener that plays every stream in real
time from its first chunk (underruns, first audible sample, chunk intervals), repeats with their
spread; checked against a synthetic server with known delays and through the real CLI."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any

import numpy as np
import pytest

from omni_runtime import cli
from omni_runtime.bench.measure import combine_repeats, make_row, passes
from omni_runtime.bench.playback import Arrival, play
from omni_runtime.bench.workload import drive, drive_open_loop, one_request, poisson_arrivals

from .conftest import PIPELINE, run_omni

pytestmark = pytest.mark.timeout(300)
RATE = 1000


def test_open_loop_arrivals_are_seeded_poisson():
    first = poisson_arrivals(4.0, 400, seed=7)
    assert first == poisson_arrivals(4.0, 400, seed=7)
    assert first != poisson_arrivals(4.0, 400, seed=8)
    assert first[0] == 0.0 and all(b > a for a, b in itertools.pairwise(first))
    assert 0.2 < first[-1] / 399 < 0.3  # mean gap about 1 / rate


def test_playback_counts_underruns_and_the_first_audible_sample_exactly():
    # 0.2 s chunks at 1.0, 1.1, 1.5 (dry at 1.4: 0.1 s gap), 1.6 (queued, dry at 1.9), 2.5 (0.6 s gap)
    arrivals = [Arrival(1.0, 0.2, None, RATE), Arrival(1.1, 0.2, None, RATE), Arrival(1.5, 0.2, 50, RATE), Arrival(1.6, 0.2, 0, RATE), Arrival(2.5, 0.2, 0, RATE)]
    heard = play(arrivals)
    assert heard.first_audio_s == 1.0 and heard.underrun_events == 2
    assert heard.underrun_s == pytest.approx(0.7)
    assert heard.first_audible_s == pytest.approx(1.5 + 0.05)  # played right on arrival, 50 samples in
    assert heard.chunk_intervals_s == pytest.approx((0.1, 0.4, 0.1, 0.9)) and heard.audio_s == pytest.approx(1.0)
    assert play([]).underrun_events == 0 and play([]).first_audio_s is None


class _Handle:
    def __init__(self, delays: list[float], chunk_s: float, server: SyntheticServer):
        self.delays, self.chunk_s, self.server = delays, chunk_s, server

    async def stream(self):
        self.server.in_flight += 1
        self.server.peak = max(self.server.peak, self.server.in_flight)
        try:
            for i, delay in enumerate(self.delays):
                await asyncio.sleep(delay)
                samples = np.zeros(int(self.chunk_s * RATE), dtype=np.float32)
                samples[10 if i == 0 else 0] = 0.5  # audible 10 samples into the first chunk
                yield {"audio": samples, "sample_rate": RATE}
        finally:
            self.server.in_flight -= 1

    async def result(self) -> dict[str, Any]:
        return {}

    async def cancel(self) -> None:
        pass


class SyntheticServer:
    """Answers every request with chunks of ``chunk_s`` audio after known ``delays``."""

    def __init__(self, delays: list[float], chunk_s: float):
        self.delays, self.chunk_s = delays, chunk_s
        self.in_flight = self.peak = 0

    async def submit(self, data: dict[str, Any]) -> _Handle:
        return _Handle(self.delays, self.chunk_s, self)


def test_the_listener_hears_the_underruns_a_synthetic_server_causes():
    # 0.1 s of audio per chunk: the second chunk comes 0.3 s after the first (a 0.2 s underrun),
    # the third 0.05 s after the second (on time), the fourth 0.25 s later (0.15 s underrun)
    server = SyntheticServer([0.05, 0.3, 0.05, 0.25], chunk_s=0.1)
    sample = asyncio.run(one_request(server, {"text": "x"}, stream=True, timeout=10))
    heard = sample.playback
    assert sample.ok and heard.underrun_events == 2
    assert heard.underrun_s == pytest.approx(0.35, abs=0.06)
    assert heard.first_audio_s == pytest.approx(0.05, abs=0.04)
    assert heard.first_audible_s == pytest.approx(heard.first_audio_s + 0.01, abs=1e-9)
    assert sample.audio_s == pytest.approx(0.4)
    steady = SyntheticServer([0.02, 0.05, 0.05, 0.05], chunk_s=0.2)
    assert asyncio.run(one_request(steady, {"text": "x"}, stream=True, timeout=10)).playback.underrun_events == 0


def test_open_loop_sends_at_the_arrival_times_whatever_is_in_flight():
    arrivals = [0.0, 0.05, 0.1, 0.15]
    server = SyntheticServer([0.4], chunk_s=0.5)
    began = time.perf_counter()
    samples, wall = asyncio.run(drive_open_loop(server, [{"text": "x"}] * 4, arrivals, stream=True, timeout=10))
    assert server.peak == 4, "every request should be in flight at once"
    assert wall == pytest.approx(0.15 + 0.4, abs=0.25) and time.perf_counter() - began >= 0.5
    closed = SyntheticServer([0.1], chunk_s=0.5)
    asyncio.run(drive(closed, [{"text": "x"}] * 4, 1, stream=True, timeout=10))
    assert closed.peak == 1
    row = make_row("current", 1, None, 60, samples, wall, 0.0, {}, rate=20.0)
    assert (row.offered_rate, row.underrun_events, row.requests) == (20.0, 0, 4)


def test_repeats_keep_the_median_run_and_the_spread():
    server = SyntheticServer([0.01, 0.3], chunk_s=0.1)
    runs = []
    for delays in ([0.01, 0.05], [0.01, 0.3], [0.2, 0.05]):
        server = SyntheticServer(delays, chunk_s=0.1)
        samples, wall = asyncio.run(drive(server, [{"text": "x"}] * 2, 2, stream=True, timeout=10))
        runs.append(make_row("current", 1, 2, 60, samples, wall, 0.0, {}))
    row = combine_repeats(runs)
    assert row.repeats == 3
    assert row.spread["underrun_events"] == [0, 2]
    low, high = row.spread["ttfa_p95_s"]
    assert low < 0.1 < 0.15 < high and low <= row.ttfa_p95_s <= high
    assert not passes(runs[1], 1.0) and passes(runs[0], 1.0) and not passes(runs[0], 0.001)


def test_bench_open_loop_through_the_cli(tmp_path):
    figure = tmp_path / "open.png"
    result = run_omni(
        "bench", "--config", str(PIPELINE), "--requests", "3", "--rate", "4,8", "--repeat", "2", "--text-length", "60",
        "--warmup", "1", "--json", "--plot", str(figure), timeout=240,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {"underrun_events", "audible_p50_s", "offered_rate", "spread"} <= set(report["fields"])
    rows = report["rows"]
    assert [(r["topology"], r["offered_rate"], r["concurrency"]) for r in rows] == [("current", 4.0, None), ("current", 8.0, None)]
    for row in rows:
        assert (row["requests"], row["failed"], row["repeats"]) == (3, 0, 2)
        assert row["audible_p50_s"] >= row["ttfa_p50_s"] > 0
        assert row["underrun_events"] >= 0 and row["underrun_s"] >= 0
        low, high = row["spread"]["ttfa_p95_s"]
        assert low <= row["ttfa_p95_s"] <= high
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--repeat", "0"], "--repeat 0"), (["--max-rate", "--ttfa-bound-ms", "0"], "--ttfa-bound-ms 0")],
)
def test_open_loop_usage_mistakes_are_refused_before_anything_starts(capsys, args, message):
    assert cli.main(["bench", "--config", str(PIPELINE), *args]) == 1
    err = capsys.readouterr().err
    assert message in err and "starting" not in err and "Traceback" not in err


@pytest.mark.parametrize(("capacity", "found", "probed"), [
    (3.0, 3.0, [1.0, 2.0, 4.0, 3.0, 3.5]),  # doubles until one fails, then bisects
    (0.3, 0.25, [1.0, 0.5, 0.25, 0.375, 0.312]),  # the start fails: halves until one passes, then bisects
    (0.1, None, [1.0, 0.5, 0.25]),  # nothing passes within two halvings
])
def test_max_rate_searches_up_from_a_passing_start_and_down_from_a_failing_one(capacity, found, probed):
    import argparse
    from dataclasses import replace

    from omni_runtime.bench.measure import _Bench

    bench = _Bench.__new__(_Bench)
    bench.args = argparse.Namespace(ttfa_bound_ms=1000.0, max_rate_start=1.0, max_rate_limit=64.0, max_rate_steps=2, max_rate_window=8.0, requests=4)
    tried: list[float] = []

    async def probe(length: int, rate: float, requests: int):  # a server that keeps up to `capacity` requests/s
        tried.append(rate)
        return replace(make_row("current", 1, None, length, [], 1.0, 0.0, {}, rate=rate), ttfa_p95_s=0.05, underrun_events=int(rate > capacity))

    bench.open = probe
    rate, rows = asyncio.run(bench.max_rate(60))
    assert (rate, tried) == (found, probed) and len(rows) == len(probed)
