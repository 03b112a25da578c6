"""Every model, default topology vs fully split, through ``omni bench`` on the CPU.

The spec: "Measure the target workload before making a topology change
persistent." This driver runs ``omni bench`` once per registered model with one
alternative, ``fully_split``: every stage in its own OS process, except stages
tied by the model's process-local edges, which stay together (a forbidden split
would not compile). GPU stages that declare no ``total_gpu_memory_fraction``
get an explicit one on the command line (the share the declared ones leave
under the placement limit), so the placement accounting is legal wherever OS
processes now share a GPU (``omni_compiler.splits``); the generated override
set is printed with the results.

    python benchmarks/models_bench.py [--models a,b] [--requests 8] [--concurrency 1,8] [--text-length 80]

Prints one table for all models: requests/s, time to first audio chunk p50/p95,
real-time factor (audio seconds produced per wall second; higher is better),
peak RSS summed over the topology's OS processes, and the fully-split/default
ratios at the same concurrency.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from omni_compiler import splits


def fully_split_overrides(config: Any) -> list[str]:
    return splits.fully_split_overrides(config) + splits.fraction_overrides(config)


def bench_model(model: str, args: argparse.Namespace) -> tuple[list[dict[str, Any]], str, float]:
    from omni_config import load_model

    split = fully_split_overrides(load_model(model))
    cmd = [
        sys.executable,
        "-c",
        "import sys; from omni_runtime.cli import main; sys.exit(main())",
        "bench",
        "--model",
        model,
        "--device",
        "cpu",
        "--format",
        "json",
        "--requests",
        str(args.requests),
        "--concurrency",
        args.concurrency,
        "--text-length",
        str(args.text_length),
        "--warmup",
        str(args.warmup),
        "--alt",
        "fully_split=" + shlex.join(split),
    ]
    began = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, check=False)
    elapsed = time.perf_counter() - began
    if not proc.stdout.strip():
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        print(f"{model}: omni bench exited {proc.returncode}: {tail[0]}", file=sys.stderr, flush=True)
        return [], shlex.join(split), elapsed
    return json.loads(proc.stdout)["rows"], shlex.join(split), elapsed


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def render(results: list[tuple[str, list[dict[str, Any]]]]) -> str:
    header = ["model", "topology", "procs", "conc", "ok/n", "req/s", "split/default", "TTFA p50 ms", "TTFA p95 ms", "RTF", "RSS MiB (sum)"]
    body = []
    for model, rows in results:
        base = {r["concurrency"]: r for r in rows if r["topology"] == "current"}
        for r in rows:
            ref = base.get(r["concurrency"])
            ratio = "-" if r["topology"] == "current" or not ref or not ref["requests_per_s"] else f"{r['requests_per_s'] / ref['requests_per_s']:.2f}x"
            body.append(
                [
                    model,
                    "default" if r["topology"] == "current" else r["topology"],
                    str(r["processes"]),
                    str(r["concurrency"]),
                    f"{r['requests'] - r['failed']}/{r['requests']}",
                    f"{r['requests_per_s']:.2f}",
                    ratio,
                    _ms(r["ttfa_p50_s"]),
                    _ms(r["ttfa_p95_s"]),
                    f"{r['realtime_factor']:.2f}",
                    f"{sum(r['rss_mib'].values()):.0f}",
                ]
            )
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in body]
    lines.append("RTF = audio seconds produced per wall-clock second (higher is better). TTFA = submit to first audio chunk.")
    return "\n".join(lines)


def main() -> int:
    from omni_config import registered_models

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=None, help="comma-separated model ids or pipeline files (default: every registered model)")
    parser.add_argument("--requests", type=int, default=8, help="requests per row (default: %(default)s)")
    parser.add_argument("--concurrency", default="1,8", help="comma-separated concurrency levels (default: %(default)s)")
    parser.add_argument("--text-length", type=int, default=80, help="characters of input text per request (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up requests before each row (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per model (default: %(default)s)")
    args = parser.parse_args()
    known = registered_models()
    models = args.models.split(",") if args.models else sorted(known)
    unknown = [m for m in models if m not in known and not Path(m).is_file()]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}: give registered model ids ({', '.join(sorted(known))}) or pipeline file paths")
    results: list[tuple[str, list[dict[str, Any]]]] = []
    splits: list[str] = []
    for model in models:
        rows, split, elapsed = bench_model(model, args)
        results.append((model, rows))
        splits.append(f"  {model}: {split}")
        print(f"[{model}: {elapsed:.0f} s]", file=sys.stderr, flush=True)
    print(f"omni bench, every model: default vs fully_split, {args.requests} requests per row, {args.text_length} chars, streaming, --device cpu")
    print(render(results))
    print("fully_split override sets:")
    print("\n".join(splits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
