"""What ``omni bench`` prints: an aligned table with ratios, or JSON; and its entry points."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from .measure import HALVINGS, Row, run_async
from .options import CURRENT, BenchUsageError, add_arguments

#: What each JSON row field means (printed with ``--json``, so a script need not guess units).
FIELDS = {
    "requests_per_s": "completed requests per wall second",
    "ttfa_p50_s": "time from submit to the first audio chunk, median (without --stream: to the complete response)",
    "ttfa_p95_s": "time to first audio, 95th percentile",
    "rtf": "real-time factor: wall seconds per audio second, all requests together (lower is better; < 1 is faster than real time)",
    "audio_s_per_s": "audio seconds produced per wall second, 1 / rtf ('x real-time'; higher is better)",
    "request_rtf_p50": "median over requests of latency / audio length (the RTF one client sees)",
    "rss_mib": "peak resident memory of each OS process of the topology while the row ran (MiB)",
    "offered_rate": "open loop: requests per second sent (seeded Poisson arrivals); null for a closed-loop (concurrency) row",
    "audible_p50_s": "time from submit to the first audible sample (magnitude >= 0.003) as played by a real-time listener, median",
    "chunk_interval_p50_s": "time between consecutive audio chunks of a stream, median (also _p95_s, _max_s)",
    "underrun_events": "times a listener playing each stream in real time from its first chunk ran out of audio, all requests",
    "underrun_requests": "requests with at least one underrun",
    "underrun_s": "seconds of silence those underruns inserted, all requests",
    "queue_wait_p50_s": "time a request waited in batching engines' queues before its first step, median (also _p95_s); null when no stage reports one",
    "repeats": "runs of this row; the row is the median run by TTFA p95",
    "spread": "[min, max] over the runs of ttfa_p50_s, ttfa_p95_s, underrun_events, underrun_s, requests_per_s",
}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def _ratio(value: float, base: float | None) -> str:
    if base is None or base <= 0:
        return "-"
    return f"{value / base:.2f}x"


def _spread_ms(row: Row, name: str) -> str:
    low, high = row.spread.get(name, [None, None])
    return "-" if low is None or row.repeats < 2 else f"{low * 1000:.0f}-{high * 1000:.0f}"


def _spread_n(row: Row, name: str) -> str:
    low, high = row.spread.get(name, [None, None])
    return "-" if low is None or row.repeats < 2 else f"{low:g}-{high:g}"


def _align(header: list[str], body: list[list[str]], title: str) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = [title] if title else []
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in body)
    return lines


def render_open_table(rows: Sequence[Row], *, title: str = "") -> str:
    """Open-loop rows: what a real-time listener heard at each offered rate (median run, spread over runs)."""
    header = [
        "topology", "chars", "offered/s", "completed/s", "ok/n", "TTFA p50 ms", "TTFA p95 ms", "p95 spread", "queue wait p50 ms", "audible p50 ms",
        "chunk gap p50/p95/max ms", "underruns (requests)", "underrun spread", "underrun s", "RTF", "x real-time", "runs",
    ]
    body = [
        [
            r.topology, str(r.text_chars), f"{r.offered_rate:g}", f"{r.requests_per_s:.2f}", f"{r.requests - r.failed}/{r.requests}",
            _ms(r.ttfa_p50_s), _ms(r.ttfa_p95_s), _spread_ms(r, "ttfa_p95_s"), _ms(r.queue_wait_p50_s), _ms(r.audible_p50_s),
            f"{_ms(r.chunk_interval_p50_s)}/{_ms(r.chunk_interval_p95_s)}/{_ms(r.chunk_interval_max_s)}",
            f"{r.underrun_events} ({r.underrun_requests})", _spread_n(r, "underrun_events"), f"{r.underrun_s:.2f}",
            "-" if r.rtf is None else f"{r.rtf:.3f}", f"{r.audio_s_per_s:.2f}", str(r.repeats),
        ]
        for r in rows
    ]
    lines = _align(header, body, title)
    lines.append("Open loop: requests arrive at the offered rate (seeded Poisson) whatever is in flight. The client plays each stream in real")
    lines.append("time from its first chunk; an underrun is a chunk that arrived after the audio before it ran out. Each row is the median")
    lines.append("of its runs by TTFA p95; spreads are min-max over the runs.")
    return "\n".join(lines)


def render_table(rows: Sequence[Row], *, title: str = "") -> str:
    """Aligned text table; ratios compare each row with the current topology at the same load."""
    base = {(r.concurrency, r.text_chars): r.requests_per_s for r in rows if r.topology == CURRENT}
    header = [
        "topology", "procs", "conc", "chars", "ok/n", "req/s", "vs current", "TTFA p50 ms", "TTFA p95 ms", "RTF", "x real-time", "RSS MiB per process",
        "p50 spread", "queue wait p50 ms", "underruns (requests)", "runs",
    ]
    body = []
    for r in rows:
        rss = " ".join(f"{k}={v:.0f}" for k, v in r.rss_mib.items())
        body.append(
            [
                r.topology,
                str(r.processes),
                str(r.concurrency),
                str(r.text_chars),
                f"{r.requests - r.failed}/{r.requests}",
                f"{r.requests_per_s:.2f}",
                _ratio(r.requests_per_s, base.get((r.concurrency, r.text_chars))),
                _ms(r.ttfa_p50_s),
                _ms(r.ttfa_p95_s),
                "-" if r.rtf is None else f"{r.rtf:.3f}",
                f"{r.audio_s_per_s:.2f}",
                f"{rss} (total {sum(r.rss_mib.values()):.0f})",
                _spread_ms(r, "ttfa_p50_s"),
                _ms(r.queue_wait_p50_s),
                f"{r.underrun_events} ({r.underrun_requests})",
                str(r.repeats),
            ]
        )
    lines = _align(header, body, title)
    lines.append("RTF = wall seconds per audio second, all requests together (lower is better, < 1 is faster than real time);")
    lines.append("x real-time = audio seconds produced per wall second (1 / RTF). TTFA = submit to the first audio chunk")
    lines.append("(without --stream: to the complete response). RSS = peak resident memory of each OS process.")
    for r in rows:
        if r.first_error:
            lines.append(f"failed requests in {r.topology} c={r.concurrency}: {r.failed}; first: {r.first_error}")
    return "\n".join(lines)


def model_name(args: argparse.Namespace) -> str:
    return args.config or getattr(args, "model", None) or getattr(args, "model_path", None) or "omni/espeak"


def to_json(rows: Sequence[Row], args: argparse.Namespace, max_rate: dict[str, float | None] | None = None) -> str:
    model = model_name(args)
    report = {"model": model, "stream": bool(args.stream), "device": args.device, "fields": FIELDS, "rows": [asdict(r) for r in rows]}
    if max_rate is not None:
        report["max_rate"] = {"ttfa_bound_ms": args.ttfa_bound_ms, "found": max_rate}
    return json.dumps(report, indent=2)


def max_rate_lines(found: dict[str, float | None], args: argparse.Namespace) -> list[str]:
    lines = []
    for label, rate in found.items():
        what = f"{rate:g} requests/s" if rate is not None else f"none (even {args.max_rate_start / 2**HALVINGS:g}/s failed)"
        lines.append(f"max rate with zero underruns and p95 TTFA <= {args.ttfa_bound_ms:g} ms, {label}: {what}")
    return lines


def run(args: argparse.Namespace) -> int:
    """Entry point of ``omni bench`` (registered by ``omni_runtime.cli``)."""

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        rows, found = asyncio.run(run_async(args, log))
    except BenchUsageError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    closed = [r for r in rows if r.offered_rate is None]
    opened = [r for r in rows if r.offered_rate is not None]
    if args.format == "json":
        print(to_json(rows, args, found if args.max_rate else None))
    else:
        mode = "streaming" if args.stream else "non-streaming"
        title = f"omni bench: {model_name(args)}, {args.requests} requests per row, {args.repeat} runs each, {mode}, device {args.device}"
        tables = ([render_table(closed, title=title)] if closed else []) + ([render_open_table(opened, title=title if not closed else "")] if opened else [])
        print("\n\n".join(tables + (["\n".join(max_rate_lines(found, args))] if found else [])))
    if args.plot and rows:
        from .plot import plot_rows

        plot_rows(rows, args.plot, title=model_name(args))
        log(f"bench: wrote {args.plot}")
    # Every request failing is a tool failure (a broken pipeline), not a usage mistake.
    return 2 if rows and all(r.failed == r.requests for r in rows) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m omni_runtime.bench``: the same command without the ``omni`` front end."""
    from omni_config import ConfigError, ConfigFileError, split_overrides

    from ..cli.selection import UserError
    from ..errors import StartupError

    rest, overrides = split_overrides(list(sys.argv[1:] if argv is None else argv))
    parser = argparse.ArgumentParser(prog="omni bench", description="Measure a workload on the current topology and on alternatives, side by side.")
    add_arguments(parser)
    args = parser.parse_args(rest)
    args.overrides = overrides
    try:
        return run(args)
    except (ConfigError, ConfigFileError) as exc:
        print(exc.render() if isinstance(exc, ConfigError) else str(exc), file=sys.stderr)
        return int(getattr(exc, "exit_code", 1))
    except StartupError as exc:
        print("error: " + exc.render(), file=sys.stderr)
        return 2
    except UserError as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code
