"""Run each topology with the real runtime and turn its requests' samples into rows."""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .options import CURRENT, Alternative, BenchUsageError, alternatives, check_options, flatten
from .workload import RequestSample, RssSampler, drive, drive_open_loop, percentile, poisson_arrivals, request_data


@dataclass(frozen=True)
class Row:
    """One line of the table: a topology at one load (a concurrency, or an offered rate) and text length.

    With ``--repeat N`` the load ran N times; the row is the median repeat by TTFA p95 and
    ``spread`` holds each key metric's minimum and maximum over the repeats."""

    topology: str
    processes: int
    concurrency: int | None
    text_chars: int
    requests: int
    failed: int
    wall_s: float
    requests_per_s: float
    ttfa_p50_s: float | None
    ttfa_p95_s: float | None
    audio_s: float
    rtf: float | None
    """Real-time factor: wall seconds per audio second produced, all requests together (lower is better)."""
    audio_s_per_s: float
    """Audio seconds produced per wall second: the inverse of ``rtf``, "x real-time" (higher is better)."""
    request_rtf_p50: float | None
    """Median over requests of latency / audio length: the RTF one client sees."""
    startup_s: float
    rss_mib: dict[str, float] = field(default_factory=dict)
    """Peak resident memory of each OS process (instance name -> MiB) while this row ran."""
    first_error: str | None = None
    offered_rate: float | None = None
    """Open loop: requests per second sent (Poisson arrivals); None for a closed-loop row."""
    audible_p50_s: float | None = None
    audible_p95_s: float | None = None
    chunk_interval_p50_s: float | None = None
    chunk_interval_p95_s: float | None = None
    chunk_interval_max_s: float | None = None
    underrun_events: int = 0
    underrun_requests: int = 0
    underrun_s: float = 0.0
    queue_wait_p50_s: float | None = None
    queue_wait_p95_s: float | None = None
    repeats: int = 1
    spread: dict[str, list[float | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Target:
    alternative: Alternative
    topology: Any
    device: str | None
    weights: str | None


def _compile_all(args: argparse.Namespace, alts: Sequence[Alternative]) -> list[_Target]:
    """Compile every topology first, so an invalid alternative fails before anything starts."""
    from omni_config import ConfigError, ConfigIssue, split_overrides

    from ..cli.selection import load_pipeline

    said: set[str] = set()

    def announce(line: str) -> None:  # the same notice (CPU fallback, deprecation) once, not once per alternative
        if line not in said:
            said.add(line)
            print(line, file=sys.stderr, flush=True)

    base = list(getattr(args, "overrides", ()) or ())
    targets: list[_Target] = []
    issues: list[Any] = []
    for alt in alts:
        rest, extra = split_overrides(list(alt.overrides))
        if rest:
            raise BenchUsageError(
                f"error: --alt {alt.name}: {' '.join(rest)!r} is not an override\n"
                f"  rule: an alternative is a set of dotted overrides such as --stages.vocoder.process vocoder\n"
                f'  fix:  write --alt {alt.name}="--stages.STAGE.process NAME ..."'
            )
        overrides = base + extra
        try:
            pipeline = load_pipeline(argparse.Namespace(**{**vars(args), "overrides": overrides}), announce)
            targets.append(_Target(alt, pipeline.topology, pipeline.device, pipeline.weights))
        except ConfigError as exc:
            label = "the current topology" if alt.name == CURRENT else f"--alt {alt.name}"
            issues.extend(ConfigIssue(f"{label}: {i.path}", i.rule, i.fix, value=i.value, source=i.source) for i in exc.issues)
    if issues:
        raise ConfigError(issues)
    return targets


@dataclass(frozen=True)
class Plan:
    """The loads to measure: closed-loop concurrencies, open-loop rates, and the max-rate search."""

    concurrencies: list[int]
    rates: list[float]
    lengths: list[int]
    max_rate: bool


class _Bench:
    """One started topology and the measurements run against it."""

    def __init__(self, runtime: Any, target: _Target, args: argparse.Namespace, startup: float, log: Callable[[str], None]):
        self.runtime, self.target, self.args, self.startup, self.log = runtime, target, args, startup, log
        self.name = target.alternative.name
        self.pids = runtime.instance_pids()

    async def _warm(self, length: int, concurrency: int) -> None:
        warm = [request_data(length, i, self.args.stream, self.args.voice) for i in range(self.args.warmup)]
        if warm:
            await drive(self.runtime, warm, min(concurrency, len(warm)), self.args.stream, self.args.request_timeout)

    async def closed(self, length: int, concurrency: int) -> Row:
        await self._warm(length, concurrency)
        rows = []
        for _ in range(self.args.repeat):
            payloads = [request_data(length, i, self.args.stream, self.args.voice) for i in range(self.args.requests)]
            with RssSampler(self.pids) as rss:
                samples, wall = await drive(self.runtime, payloads, concurrency, self.args.stream, self.args.request_timeout)
            rows.append(make_row(self.name, len(self.target.topology.instances), concurrency, length, samples, wall, self.startup, rss.mib()))
        row = combine_repeats(rows)
        self.log(f"bench: {self.name} c={concurrency} chars={length}: {row.requests_per_s:.2f} req/s, {row.audio_s_per_s:.2f} audio s/s, underruns {row.underrun_events}")
        return row

    async def open(self, length: int, rate: float, requests: int | None = None) -> Row:
        await self._warm(length, 1)
        rows = []
        for repeat in range(self.args.repeat):
            payloads = [request_data(length, i, self.args.stream, self.args.voice) for i in range(requests or self.args.requests)]
            arrivals = poisson_arrivals(rate, len(payloads), self.args.seed + repeat)
            with RssSampler(self.pids) as rss:
                samples, wall = await drive_open_loop(self.runtime, payloads, arrivals, self.args.stream, self.args.request_timeout)
            rows.append(make_row(self.name, len(self.target.topology.instances), None, length, samples, wall, self.startup, rss.mib(), rate=rate))
        row = combine_repeats(rows)
        self.log(
            f"bench: {self.name} rate={rate:g}/s chars={length}: completed {row.requests_per_s:.2f} req/s, TTFA p95 {_ms(row.ttfa_p95_s)} ms, "
            f"underruns {row.underrun_events} (spread {row.spread['underrun_events']})"
        )
        return row

    async def max_rate(self, length: int) -> tuple[float | None, list[Row]]:
        """Highest rate that ``passes``, each probe held ``--max-rate-window`` seconds: double from
        ``--max-rate-start`` until one fails (if the start itself fails, halve it up to
        ``HALVINGS`` times until one passes), then bisect."""
        bound = self.args.ttfa_bound_ms / 1000.0
        rate, good, bad, rows = self.args.max_rate_start, None, None, []

        def held(r: float) -> int:
            return max(self.args.requests, math.ceil(r * self.args.max_rate_window))

        while bad is None and rate <= self.args.max_rate_limit:
            rows.append(await self.open(length, rate, held(rate)))
            if passes(rows[-1], bound):
                good, rate = rate, rate * 2
            else:
                bad = rate
        rate = self.args.max_rate_start
        for _ in range(HALVINGS if good is None else 0):
            rate = round(rate / 2, 4)
            rows.append(await self.open(length, rate, held(rate)))
            if passes(rows[-1], bound):
                good = rate
                break
            bad = rate
        if good is None or bad is None:
            return good, rows
        for _ in range(self.args.max_rate_steps):
            mid = round((good + bad) / 2, 3)
            rows.append(await self.open(length, mid, held(mid)))
            good, bad = (mid, bad) if passes(rows[-1], bound) else (good, mid)
        return good, rows


#: Times ``--max-rate`` halves a start rate that failed before it reports none.
HALVINGS = 2


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


async def _bench_topology(target: _Target, args: argparse.Namespace, plan: Plan, log: Callable[[str], None]) -> tuple[list[Row], dict[str, float | None]]:
    from ..cli.args import backend_kwargs
    from ..parent.runtime import Runtime

    runtime = Runtime(target.topology, device=target.device, startup_timeout=args.startup_timeout, model_path=target.weights, log=None, **backend_kwargs(args))
    name = target.alternative.name
    log(f"bench: starting {name} ({len(target.topology.instances)} processes)")
    began = time.perf_counter()
    rows: list[Row] = []
    found: dict[str, float | None] = {}
    try:
        await runtime.start()
        bench = _Bench(runtime, target, args, time.perf_counter() - began, log)
        for length in plan.lengths:
            for concurrency in plan.concurrencies:
                rows.append(await bench.closed(length, concurrency))
            for rate in plan.rates:
                rows.append(await bench.open(length, rate))
            if plan.max_rate:
                best, probed = await bench.max_rate(length)
                rows.extend(probed)
                found[f"{name}, {length} chars"] = best
    finally:
        await runtime.shutdown()
    return rows, found


def make_row(
    name: str, processes: int, concurrency: int | None, length: int, samples: list[RequestSample], wall: float, startup: float, rss: dict[str, float],
    *, rate: float | None = None,
) -> Row:
    ok = [s for s in samples if s.ok]
    played = [s.playback for s in ok if s.playback is not None]
    intervals = [gap for p in played for gap in p.chunk_intervals_s]
    ttfa = [s.first_audio_s for s in ok if s.first_audio_s is not None]
    audio = sum(s.audio_s for s in ok)
    errors = [s.error for s in samples if not s.ok]
    return Row(
        topology=name,
        processes=processes,
        concurrency=concurrency,
        text_chars=length,
        requests=len(samples),
        failed=len(errors),
        wall_s=round(wall, 6),
        requests_per_s=round(len(ok) / wall, 4) if wall > 0 else 0.0,
        ttfa_p50_s=percentile(ttfa, 50),
        ttfa_p95_s=percentile(ttfa, 95),
        audio_s=round(audio, 6),  # RTF and audio s/s are computed from it: keep their precision
        rtf=round(wall / audio, 6) if audio > 0 else None,
        audio_s_per_s=round(audio / wall, 4) if wall > 0 else 0.0,
        request_rtf_p50=percentile([s.latency_s / s.audio_s for s in ok if s.audio_s > 0], 50),
        startup_s=round(startup, 2),
        rss_mib=rss,
        first_error=errors[0] if errors else None,
        offered_rate=rate,
        audible_p50_s=percentile([p.first_audible_s for p in played if p.first_audible_s is not None], 50),
        audible_p95_s=percentile([p.first_audible_s for p in played if p.first_audible_s is not None], 95),
        chunk_interval_p50_s=percentile(intervals, 50),
        chunk_interval_p95_s=percentile(intervals, 95),
        chunk_interval_max_s=max(intervals) if intervals else None,
        underrun_events=sum(p.underrun_events for p in played),
        underrun_requests=sum(1 for p in played if p.underrun_events),
        underrun_s=round(sum(p.underrun_s for p in played), 6),
        queue_wait_p50_s=percentile([s.queue_wait_s for s in ok if s.queue_wait_s is not None], 50),
        queue_wait_p95_s=percentile([s.queue_wait_s for s in ok if s.queue_wait_s is not None], 95),
    )


#: Metrics whose spread over repeats each row reports.
SPREAD = ("ttfa_p50_s", "ttfa_p95_s", "underrun_events", "underrun_s", "requests_per_s")


def combine_repeats(rows: list[Row]) -> Row:
    """The median repeat (by TTFA p95, failures last; of an even count the worse of the middle two)
    with each key metric's [min, max] over all repeats."""
    ordered = sorted(rows, key=lambda r: (r.failed, r.ttfa_p95_s if r.ttfa_p95_s is not None else float("inf")))
    median = ordered[len(ordered) // 2]
    spread = {}
    for name in SPREAD:
        values = [getattr(r, name) for r in rows if getattr(r, name) is not None]
        spread[name] = [min(values), max(values)] if values else [None, None]
    return replace(median, repeats=len(rows), spread=spread)


def passes(row: Row, ttfa_bound_s: float) -> bool:
    """A rate is served when the median repeat had no failures, no underruns and p95 TTFA within the bound."""
    return row.failed == 0 and row.underrun_events == 0 and row.ttfa_p95_s is not None and row.ttfa_p95_s <= ttfa_bound_s


async def run_async(args: argparse.Namespace, log: Callable[[str], None]) -> tuple[list[Row], dict[str, float | None]]:
    check_options(args)
    targets = _compile_all(args, alternatives(args))
    rates = [r for group in (args.rate or []) for r in group]
    open_loop = bool(rates) or args.max_rate
    plan = Plan(
        concurrencies=flatten(args.concurrency, [] if open_loop else [1]),
        rates=list(dict.fromkeys(rates)),
        lengths=flatten(args.text_length, [200]),
        max_rate=args.max_rate,
    )
    rows: list[Row] = []
    found: dict[str, float | None] = {}
    for target in targets:
        more, best = await _bench_topology(target, args, plan, log)
        rows.extend(more)
        found.update(best)
    return rows, found
