"""Run each topology with the real runtime and turn its requests' samples into rows."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .options import CURRENT, Alternative, BenchUsageError, alternatives, check_options, flatten
from .workload import RequestSample, RssSampler, drive, percentile, request_data


@dataclass(frozen=True)
class Row:
    """One line of the table: a topology at one concurrency and text length."""

    topology: str
    processes: int
    concurrency: int
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


async def _bench_topology(target: _Target, args: argparse.Namespace, concurrencies: list[int], lengths: list[int], log: Callable[[str], None]) -> list[Row]:
    from ..cli.args import backend_kwargs
    from ..parent.runtime import Runtime

    runtime = Runtime(target.topology, device=target.device, startup_timeout=args.startup_timeout, model_path=target.weights, log=None, **backend_kwargs(args))
    name = target.alternative.name
    log(f"bench: starting {name} ({len(target.topology.instances)} processes)")
    began = time.perf_counter()
    rows: list[Row] = []
    try:
        await runtime.start()
        startup = time.perf_counter() - began
        pids = runtime.instance_pids()
        for length in lengths:
            for concurrency in concurrencies:
                warm = [request_data(length, i, args.stream) for i in range(args.warmup)]
                if warm:
                    await drive(runtime, warm, min(concurrency, len(warm)), args.stream, args.request_timeout)
                payloads = [request_data(length, i, args.stream) for i in range(args.requests)]
                with RssSampler(pids) as rss:
                    samples, wall = await drive(runtime, payloads, concurrency, args.stream, args.request_timeout)
                rows.append(make_row(name, len(target.topology.instances), concurrency, length, samples, wall, startup, rss.mib()))
                log(f"bench: {name} c={concurrency} chars={length}: {rows[-1].requests_per_s:.2f} req/s, {rows[-1].audio_s_per_s:.2f} audio s/s")
    finally:
        await runtime.shutdown()
    return rows


def make_row(name: str, processes: int, concurrency: int, length: int, samples: list[RequestSample], wall: float, startup: float, rss: dict[str, float]) -> Row:
    ok = [s for s in samples if s.ok]
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
    )


async def run_async(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    check_options(args)
    targets = _compile_all(args, alternatives(args))
    concurrencies = flatten(args.concurrency, [1])
    lengths = flatten(args.text_length, [200])
    rows: list[Row] = []
    for target in targets:
        rows.extend(await _bench_topology(target, args, concurrencies, lengths, log))
    return rows
