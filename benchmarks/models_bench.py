"""Every model through ``omni bench`` on the CPU: how throughput and time to first audio scale
with concurrency (continuous batching), and the default topology against a fully split one.

The path measured is the one users take: ``omni bench`` starts the real runtime and drives
requests through ``Runtime.submit`` with streaming, ``--requests-per-client`` requests per
concurrent client (so every level does the same work per client, after the same warm-up of
one request per client). Each concurrency level runs in its own ``omni bench`` invocation.

Scaling goal (issue 11), printed per model: at concurrency 8, audio seconds produced per wall
second at least 4x the concurrency-1 figure, and TTFA p50 at most 2x. The machine is shared,
so each run prints the load average it saw, and ``--rounds N`` repeats every row, alternating
concurrency levels, and keeps the median.

``--split`` adds the fully split alternative: every stage in its own OS process, except
stages tied by the model's process-local edges (``omni_compiler.splits``), with GPU fractions
made explicit so the placement stays legal; the override sets are printed with the results.

    python benchmarks/models_bench.py [--models a,b] [--concurrency 1,8,32] [--requests-per-client 4]
                                      [--text-length 80] [--rounds 1] [--split]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from omni_compiler import splits

GOAL_MODELS = ("qwen/qwen3-tts", "openmoss/moss-tts-delay", "bosonai/higgs-tts-3-4b")
GOAL_THROUGHPUT, GOAL_TTFA = 4.0, 2.0


def fully_split_overrides(config: Any) -> list[str]:
    return splits.fully_split_overrides(config) + splits.fraction_overrides(config)


def omni_bench(model: str, concurrency: int, args: argparse.Namespace, split: list[str] | None) -> tuple[list[dict[str, Any]], float]:
    """One ``omni bench`` run at one concurrency; returns its rows (each with the load it saw)."""
    cmd = [
        sys.executable, "-c", "import sys; from omni_runtime.cli import main; sys.exit(main())",
        "bench", "--model", model, "--device", "cpu", "--json",
        "--requests", str(max(args.requests_per_client * concurrency, args.min_requests)), "--repeat", "1",
        "--concurrency", str(concurrency), "--text-length", str(args.text_length), "--warmup", str(concurrency),
    ]
    if split:
        cmd += ["--alt", "fully_split=" + shlex.join(split)]
    load_before = os.getloadavg()[0]
    began = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, check=False)
    elapsed = time.perf_counter() - began
    load = (load_before + os.getloadavg()[0]) / 2
    if not proc.stdout.strip():
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        print(f"{model} c={concurrency}: omni bench exited {proc.returncode}: {tail[0]}", file=sys.stderr, flush=True)
        return [], elapsed
    rows = json.loads(proc.stdout)["rows"]
    for row in rows:
        row["load"] = load
    return rows, elapsed


def median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each measured figure over rounds (failures summed, RSS per process maxed)."""
    out = dict(runs[0])
    for key in ("requests_per_s", "audio_s_per_s", "ttfa_p50_s", "ttfa_p95_s", "rtf", "load"):
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    out["failed"] = sum(r["failed"] for r in runs)
    out["requests"] = sum(r["requests"] for r in runs)
    out["rss_mib"] = {name: max(r["rss_mib"].get(name, 0.0) for r in runs) for name in runs[0]["rss_mib"]}
    out["rounds"] = len(runs)
    return out


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def _x(value: float | None, base: float | None) -> str:
    return "-" if value is None or not base else f"{value / base:.2f}x"


def render(results: dict[str, list[dict[str, Any]]]) -> str:
    header = [
        "model", "topology", "procs", "conc", "ok/n", "req/s", "audio s/s", "vs c=1", "RTF",
        "TTFA p50 ms", "vs c=1", "TTFA p95 ms", "split/default", "RSS MiB", "load",
    ]
    body = []
    for model, rows in results.items():
        by = {(r["topology"], r["concurrency"]): r for r in rows}
        for r in rows:
            c1 = by.get((r["topology"], 1))
            default = by.get(("current", r["concurrency"]))
            body.append([
                model,
                "default" if r["topology"] == "current" else r["topology"],
                str(r["processes"]),
                str(r["concurrency"]),
                f"{r['requests'] - r['failed']}/{r['requests']}",
                f"{r['requests_per_s']:.2f}",
                f"{r['audio_s_per_s']:.2f}",
                _x(r["audio_s_per_s"], c1 and c1["audio_s_per_s"]) if r["concurrency"] != 1 else "-",
                "-" if r["rtf"] is None else f"{r['rtf']:.3f}",
                _ms(r["ttfa_p50_s"]),
                _x(r["ttfa_p50_s"], c1 and c1["ttfa_p50_s"]) if r["concurrency"] != 1 else "-",
                _ms(r["ttfa_p95_s"]),
                "-" if r["topology"] == "current" else _x(r["audio_s_per_s"], default and default["audio_s_per_s"]),
                f"{sum(r['rss_mib'].values()):.0f}",
                f"{r['load']:.1f}",
            ])
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in body]
    lines.append("audio s/s = audio seconds produced per wall second (x real-time); RTF = its inverse (lower is better);")
    lines.append("vs c=1 = the same topology at concurrency 1; TTFA = submit to the first audio chunk; RSS = peak, summed over")
    lines.append(f"the topology's processes; load = 1-minute load average of this machine during the run (cores: {os.cpu_count()}).")
    return "\n".join(lines)


def goal_lines(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = []
    for model, rows in results.items():
        by = {r["concurrency"]: r for r in rows if r["topology"] == "current"}
        if model not in GOAL_MODELS or 1 not in by or 8 not in by:
            continue
        thru = by[8]["audio_s_per_s"] / by[1]["audio_s_per_s"] if by[1]["audio_s_per_s"] else 0.0
        ttfa = by[8]["ttfa_p50_s"] / by[1]["ttfa_p50_s"] if by[1]["ttfa_p50_s"] and by[8]["ttfa_p50_s"] else float("inf")
        verdict = "met" if thru >= GOAL_THROUGHPUT and ttfa <= GOAL_TTFA else "MISSED"
        lines.append(f"  {model}: throughput c8/c1 {thru:.2f}x (goal >= {GOAL_THROUGHPUT:g}x), TTFA p50 c8/c1 {ttfa:.2f}x (goal <= {GOAL_TTFA:g}x): {verdict}")
    return lines


def main() -> int:
    from omni_config import load_model, registered_models

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=None, help="comma-separated model ids or pipeline files (default: every registered model)")
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated concurrency levels (default: %(default)s)")
    parser.add_argument("--requests-per-client", type=int, default=4, help="measured requests per concurrent client (default: %(default)s)")
    parser.add_argument("--min-requests", type=int, default=8, help="at least this many measured requests per row (default: %(default)s)")
    parser.add_argument("--text-length", type=int, default=80, help="characters of input text per request (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat every row this many times, alternating levels, and keep the median (default: %(default)s)")
    parser.add_argument("--split", action="store_true", help="also measure the fully split topology of every model")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per omni bench run (default: %(default)s)")
    args = parser.parse_args()
    known = registered_models()
    models = args.models.split(",") if args.models else sorted(known)
    unknown = [m for m in models if m not in known and not Path(m).is_file()]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}: give registered model ids ({', '.join(sorted(known))}) or pipeline file paths")
    try:
        levels = [int(c) for c in args.concurrency.split(",")]
    except ValueError:
        parser.error(f"--concurrency {args.concurrency!r}: expected integers like 1,8,32")
    if any(c < 1 for c in levels) or args.rounds < 1 or args.requests_per_client < 1:
        parser.error("--concurrency levels, --rounds and --requests-per-client must be at least 1")
    results: dict[str, list[dict[str, Any]]] = {}
    split_sets = []
    for model in models:
        split = fully_split_overrides(load_model(model)) if args.split else None
        if split:
            split_sets.append(f"  {model}: {shlex.join(split)}")
        runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for round_ in range(args.rounds):
            for concurrency in levels if round_ % 2 == 0 else list(reversed(levels)):
                rows, elapsed = omni_bench(model, concurrency, args, split)
                for row in rows:
                    runs.setdefault((row["topology"], row["concurrency"]), []).append(row)
                print(f"[{model} c={concurrency} round {round_ + 1}: {elapsed:.0f} s, load {os.getloadavg()[0]:.1f}]", file=sys.stderr, flush=True)
        results[model] = [median_row(v) for _, v in sorted(runs.items(), key=lambda kv: (kv[0][0] != "current", kv[0][0], kv[0][1]))]
    print(
        f"omni bench per model on the CPU: {args.requests_per_client} requests per client (at least {args.min_requests}), "
        f"{args.text_length} chars, streaming, median of {args.rounds} round(s)"
    )
    print(render(results))
    goals = goal_lines(results)
    if goals:
        print("scaling goal at concurrency 8 (default topology):")
        print("\n".join(goals))
    if split_sets:
        print("fully_split override sets:")
        print("\n".join(split_sets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
