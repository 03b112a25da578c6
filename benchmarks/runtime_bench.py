"""Runtime benchmark: transport throughput, per-hop latency, omni vs Ray Serve.

Prints one table; every ratio is measured in this run, on this machine.

(a) cross-process tensor throughput, 1 KiB .. 256 MiB, against an in-process
    ``torch.clone`` baseline (rows from ``runtime_bench_transport.transport_rows``:
    ``copy`` = the receiver copies out of shared memory (the runtime's only mode);
    target: copy >= 50% of the baseline bandwidth from 16 MiB up).
(b) per-hop latency of a 4-stage no-op pipeline, grouped in one process vs
    split into four, p50 and p99 per hop (target: cross-process hop < 250 us p50).
    Each stage stamps ``time.monotonic_ns()`` (CLOCK_MONOTONIC is one clock for
    every process on Linux), so a hop is the gap between two consecutive stamps:
    the handoff alone, without the client's round trip.
(c) the same pipeline as a Ray Serve deployment graph (each deployment
    ``ray_actor_options={"num_cpus": 0}``) vs omni split in four processes:
    requests/s and p50 at concurrency 1 and 64 (target: omni >= 3x Ray Serve
    throughput). Skipped, and said so, when ``ray`` is not importable.

Usage: ``python benchmarks/runtime_bench.py [--requests N] [--skip-transport] [--skip-ray]``
(``nox -s bench_runtime`` installs ``ray[serve]`` for (c)).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STAGES = ("s1", "s2", "s3", "s4")
HOP_TARGET_US = 250.0
THROUGHPUT_TARGET = 3.0
HOPS = ("submit->s1", "s1->s2", "s2->s3", "s3->s4", "s4->result")
INTER_STAGE_HOPS = frozenset(HOPS[1:-1])
"""Stage-to-stage handoffs: the ones that cross a process boundary when split (the target applies to them)."""


# -- the no-op stage (imported by the spawned workers as runtime_bench:build_noop) --


class NoOpStage:
    """Appends one timestamp and passes the payload on: the cheapest possible stage."""

    async def process(self, payload: Any) -> Any:
        payload.data["t"].append(time.monotonic_ns())
        return payload


def build_noop() -> NoOpStage:
    return NoOpStage()


def pipeline_config(grouped: bool) -> Any:
    from omni_config import raw_config

    stages = []
    for index, name in enumerate(STAGES):
        stage: dict[str, Any] = {"name": name, "factory": "runtime_bench:build_noop", "process": "pipeline" if grouped else name}
        if index + 1 < len(STAGES):
            stage["next"] = STAGES[index + 1]
        else:
            stage["terminal"] = True
        stages.append(stage)
    return raw_config({"name": f"noop4-{'grouped' if grouped else 'split'}", "stages": stages, "process_local_edges": []})


# -- measurement helpers --------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


@dataclass(frozen=True)
class Load:
    """Closed-loop load result: ``concurrency`` clients each sending back-to-back requests."""

    concurrency: int
    requests: int
    seconds: float
    latencies: list[float]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def p50_ms(self) -> float:
        return pct(self.latencies, 0.5) * 1e3


async def closed_loop(call: Callable[[], Awaitable[Any]], concurrency: int, total: int) -> Load:
    latencies: list[float] = []
    remaining = total

    async def client() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            began = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return Load(concurrency, total, time.perf_counter() - began, latencies)


# -- (b) and the omni half of (c) --------------------------------------------------


@dataclass(frozen=True)
class OmniResult:
    hops_us: dict[str, list[float]]
    loads: dict[int, Load]


async def measure_omni(grouped: bool, hop_requests: int, load_requests: int, concurrencies: tuple[int, ...]) -> OmniResult:
    from omni_compiler import compile as compile_topology
    from omni_runtime import Runtime

    runtime = Runtime(compile_topology(pipeline_config(grouped)), device="cpu", log=None)
    await runtime.start()
    try:

        async def one() -> dict[str, Any]:
            handle = await runtime.submit({"text": "x", "t": [time.monotonic_ns()]})
            result = await handle.result()
            result["t"].append(time.monotonic_ns())
            return result

        for _ in range(max(50, hop_requests // 10)):  # warm-up: sockets, code paths, allocators
            await one()
        hops: dict[str, list[float]] = {name: [] for name in HOPS}
        for _ in range(hop_requests):
            stamps = (await one())["t"]
            if len(stamps) != len(HOPS) + 1:
                raise RuntimeError(f"a request passed {len(stamps) - 2} stages instead of {len(STAGES)}: stamps {stamps}")
            for name, a, b in zip(HOPS, stamps, stamps[1:]):
                hops[name].append((b - a) / 1e3)
        loads = {c: await closed_loop(one, c, load_requests) for c in concurrencies}
        return OmniResult(hops, loads)
    finally:
        await runtime.shutdown()


# -- (c) Ray Serve -------------------------------------------------------------------


def ray_available() -> str | None:
    """None when Ray Serve can be imported, else the reason it cannot."""
    try:
        import ray  # noqa: F401
        from ray import serve  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install
        return f"{type(exc).__name__}: {exc}"
    return None


def measure_ray(load_requests: int, concurrencies: tuple[int, ...]) -> dict[int, Load]:
    import logging

    import ray
    from ray import serve

    for name in ("ray", "ray.serve"):
        logging.getLogger(name).setLevel(logging.ERROR)
    ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        serve.start(http_options={"location": "NoServer"})

        @serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1024)
        class NoOp:
            def __init__(self, downstream: Any = None):
                self.downstream = downstream

            async def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
                data["t"].append(time.monotonic_ns())
                if self.downstream is None:
                    return data
                return await self.downstream.remote(data)

        graph = NoOp.options(name="s1").bind(NoOp.options(name="s2").bind(NoOp.options(name="s3").bind(NoOp.options(name="s4").bind())))
        handle = serve.run(graph, name="noop4", route_prefix=None, logging_config={"log_level": "ERROR"})

        async def run() -> dict[int, Load]:
            async def one() -> Any:
                return await handle.remote({"text": "x", "t": [time.monotonic_ns()]})

            for _ in range(100):
                await one()
            return {c: await closed_loop(one, c, load_requests) for c in concurrencies}

        return asyncio.run(run())
    finally:
        serve.shutdown()
        ray.shutdown()


# -- (a) -----------------------------------------------------------------------------


def transport_section(trials: int) -> tuple[list[list[str]], str | None]:
    """Rows of (a) from ``runtime_bench_transport.transport_rows`` (helper module beside this file)."""
    sys.path.insert(0, str(HERE))
    try:
        import runtime_bench_transport as transport
    except ImportError as exc:
        return [], f"(a) skipped: benchmarks/runtime_bench_transport.py is not importable ({exc})"
    rows = []
    for row in transport.transport_rows(trials=trials):
        size = row["size"]
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        in_target = size >= transport.TARGET_FROM
        for mode in transport.MODES:
            ratio = row[f"{mode}_ratio"]
            verdict = ("PASS" if ratio >= transport.TARGET_RATIO else "MISS") if in_target and mode == "copy" else ""
            target = f">= {transport.TARGET_RATIO:g}x from {transport.TARGET_FROM >> 20} MiB" if in_target and mode == "copy" else ""
            rows.append(
                ["(a) tensor throughput", f"{label} {mode}", f"{row[f'{mode}_gbs']:.3g} GB/s", f"clone {row['clone_gbs']:.3g} GB/s", f"{ratio:.2f}x", target, verdict]
            )
    return rows, None


# -- table ---------------------------------------------------------------------------


def us(value: float) -> str:
    return f"{value:,.0f} us" if value >= 100 else f"{value:.1f} us"


def render(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) if i < len(r) else 0 for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def hop_rows(grouped: OmniResult, split: OmniResult) -> list[list[str]]:
    rows = []
    for hop in grouped.hops_us:
        g, s = grouped.hops_us[hop], split.hops_us[hop]
        g50, s50, g99, s99 = pct(g, 0.5), pct(s, 0.5), pct(g, 0.99), pct(s, 0.99)
        inter = hop in INTER_STAGE_HOPS
        verdict = ("PASS" if s50 < HOP_TARGET_US else "MISS") if inter else ""
        rows.append(["(b) hop latency", f"{hop} p50", us(s50), us(g50), f"{s50 / g50:.1f}x", f"split < {HOP_TARGET_US:.0f} us" if inter else "", verdict])
        rows.append(["(b) hop latency", f"{hop} p99", us(s99), us(g99), f"{s99 / g99:.1f}x", "", ""])
    return rows


def load_rows(label: str, omni: dict[int, Load], other: dict[int, Load], other_name: str, target: float | None) -> list[list[str]]:
    rows = []
    for c in sorted(omni):
        o, r = omni[c], other[c]
        ratio = o.rps / r.rps
        verdict = ("PASS" if ratio >= target else "MISS") if target else ""
        rows.append([label, f"c={c} req/s", f"{o.rps:,.0f}", f"{other_name} {r.rps:,.0f}", f"{ratio:.2f}x", f">= {target:g}x" if target else "", verdict])
        rows.append([label, f"c={c} p50", f"{o.p50_ms:.2f} ms", f"{other_name} {r.p50_ms:.2f} ms", f"{o.p50_ms / r.p50_ms:.2f}x", "lower is better", ""])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="sequential requests for the hop latencies (default: %(default)s)")
    parser.add_argument("--load-requests", type=int, default=3000, help="requests per throughput point (default: %(default)s)")
    parser.add_argument("--skip-transport", action="store_true", help="leave out (a)")
    parser.add_argument("--transport-trials", type=int, default=3, help="best-of rounds per size in (a) (default: %(default)s)")
    parser.add_argument("--skip-ray", action="store_true", help="leave out the Ray Serve half of (c)")
    args = parser.parse_args(argv)
    concurrencies = (1, 64)
    notes: list[str] = []
    rows: list[list[str]] = []

    if not args.skip_transport:
        transport, note = transport_section(args.transport_trials)
        rows += transport
        if note:
            notes.append(note)

    grouped = asyncio.run(measure_omni(True, args.requests, args.load_requests, concurrencies))
    split = asyncio.run(measure_omni(False, args.requests, args.load_requests, concurrencies))
    rows += hop_rows(grouped, split)
    rows += load_rows("(c) omni split vs grouped", split.loads, grouped.loads, "grouped", None)

    reason = "skipped by --skip-ray" if args.skip_ray else ray_available()
    if reason is None:
        ray_loads = measure_ray(args.load_requests, concurrencies)
        rows += load_rows("(c) omni vs Ray Serve", split.loads, ray_loads, "ray", THROUGHPUT_TARGET)
    else:
        notes.append(f"(c) Ray Serve skipped: ray is not importable ({reason}); run `nox -s bench_runtime` to install ray[serve]")

    print(f"runtime benchmark ({os.cpu_count()} CPUs, python {sys.version.split()[0]}); value = omni split into 4 processes unless noted")
    print(render(rows, ["section", "case", "value", "baseline", "ratio", "target", "verdict"]))
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
