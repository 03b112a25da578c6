"""Runtime benchmark: transport throughput, per-hop latency, omni vs Ray Serve and Ray core, equal work.

Prints one table; every ratio is measured in this run, on this machine.

(a) cross-process tensor throughput, 1 KiB .. 256 MiB, through the runtime's
    own async data plane (``Plane`` to ``Plane`` in another process, see
    ``runtime_bench_transport.py``) against an in-process ``torch.clone``
    (target: >= 50% of the baseline bandwidth from 16 MiB up).
(b) per-hop latency of the 4-stage no-op pipeline (``bench_common.py``), p50
    and p99 per hop, the parent's own hops included (submit->s1, s4->result):
    omni split into four processes vs grouped in one, and the same hops in the
    Ray Serve and Ray core baselines. Each stage stamps ``time.monotonic_ns()``
    (one clock for every process on Linux), so a hop is the handoff alone.
    Target: an omni cross-process stage-to-stage hop < 250 us p50.
(c) requests/s and p50 at concurrency 1 and 64, omni split in four processes
    through ``Runtime.submit`` (the path ``omni serve`` uses) against Ray Serve
    through its handle and Ray core actors chained by ``ObjectRef``; then omni
    through HTTP (``omni serve``, ``POST /v1/audio/speech``) against Ray Serve
    through its HTTP proxy (the same request, the same 480 bytes of PCM back),
    from a lean keep-alive client in several processes (``http_client.py``), whose own
    ceiling against a trivial server is measured in the same run and printed next to each
    HTTP rate (a rate above half the ceiling is marked client-bound). Target: omni >= 3x
    Ray Serve, both paths.

Equal work: the same stages, payload and hops for every contender, the same
warm-up (``bench_common.WARMUP`` requests before every measured point), each
Ray contender in its fastest idiomatic form (see ``bench_common.py``).

Usage: ``python benchmarks/runtime_bench.py [--requests N] [--load-requests N] [--skip-transport] [--skip-ray]``
(``nox -s bench_runtime`` installs ``ray[serve]``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_common as bc  # noqa: E402

HOP_TARGET_US = 250.0
THROUGHPUT_TARGET = 3.0
INTER_STAGE_HOPS = frozenset(bc.HOPS[1:-1])
CONCURRENCIES = (1, 64)


@dataclass(frozen=True)
class Measured:
    hops_us: dict[str, list[float]]
    loads: dict[int, bc.Load]


async def measure_omni(processes: tuple[str, ...], hop_requests: int, load_requests: int, **runtime_kwargs: Any) -> Measured:
    """The pipeline through ``Runtime.submit``: sequential requests for the hops, then the closed loops."""
    from omni_compiler import compile as compile_topology
    from omni_config import raw_config
    from omni_runtime import Runtime

    ray = runtime_kwargs.pop("ray_placement", None)
    runtime = Runtime(compile_topology(raw_config(bc.pipeline_dict(processes, ray))), device="cpu", log=None, **runtime_kwargs)
    await runtime.start()
    try:

        async def one() -> dict[str, Any]:
            handle = await runtime.submit(bc.entry_payload())
            result = await handle.result()
            result["t"].append(time.monotonic_ns())
            return result

        hops = await bc.measure_hops(one, hop_requests)
        return Measured(hops, await bc.warm_and_load(one, CONCURRENCIES, load_requests))
    finally:
        await runtime.shutdown()


def measure_omni_http(load_requests: int) -> dict[int, bc.Load]:
    """``omni serve`` on the split pipeline in its own process; the client in another."""
    port = bc.free_port()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp, "noop4.yaml")
        config.write_text(yaml.safe_dump(bc.pipeline_dict(bc.SPLIT)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
        cmd = [sys.executable, "-m", "omni_runtime.cli", "serve", "--config", str(config), "--device", "cpu", "--port", str(port), "--log-level", "warning"]
        server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}/v1/audio/speech"
            bc.wait_http(url)
            return bc.http_load(url, CONCURRENCIES, load_requests)
        finally:
            server.terminate()
            server.wait(60)


def transport_section(trials: int) -> list[list[str]]:
    import runtime_bench_transport as transport

    rows = []
    for row in transport.transport_rows(trials=trials):
        size = row["size"]
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        in_target = size >= transport.TARGET_FROM
        verdict = ("PASS" if row["copy_ratio"] >= transport.TARGET_RATIO else "MISS") if in_target else ""
        target = f">= {transport.TARGET_RATIO:g}x from {transport.TARGET_FROM >> 20} MiB" if in_target else ""
        rows.append(["(a) tensor throughput", f"{label} async path", f"{row['copy_gbs']:.3g} GB/s", f"clone {row['clone_gbs']:.3g} GB/s", f"{row['copy_ratio']:.2f}x", target, verdict])
    return rows


def hop_rows(split: Measured, grouped: Measured, others: dict[str, dict[str, list[float]]]) -> list[list[str]]:
    rows = []
    for hop in bc.HOPS:
        s, g = split.hops_us[hop], grouped.hops_us[hop]
        inter = hop in INTER_STAGE_HOPS
        for q, label in ((0.5, "p50"), (0.99, "p99")):
            sv, gv = bc.pct(s, q), bc.pct(g, q)
            verdict = ("PASS" if sv < HOP_TARGET_US else "MISS") if inter and q == 0.5 else ""
            target = f"split < {HOP_TARGET_US:.0f} us" if inter and q == 0.5 else ""
            peers = ", ".join(f"{name} {bc.us(bc.pct(h[hop], q))}" for name, h in others.items())
            rows.append(["(b) hop latency", f"{hop} {label}", bc.us(sv), f"grouped {bc.us(gv)}" + (f"; {peers}" if peers else ""), f"{sv / gv:.1f}x", target, verdict])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="sequential requests for the hop latencies (default: %(default)s)")
    parser.add_argument("--load-requests", type=int, default=1000, help="requests per throughput point (default: %(default)s)")
    parser.add_argument("--skip-transport", action="store_true", help="leave out (a)")
    parser.add_argument("--transport-trials", type=int, default=3, help="best-of rounds per size in (a) (default: %(default)s)")
    parser.add_argument("--skip-ray", action="store_true", help="leave out the Ray baselines")
    parser.add_argument("--skip-http", action="store_true", help="leave out the HTTP half of (c)")
    args = parser.parse_args(argv)
    rows: list[list[str]] = []
    notes: list[str] = []
    if not args.skip_transport:
        rows += transport_section(args.transport_trials)

    split = asyncio.run(measure_omni(bc.SPLIT, args.requests, args.load_requests))
    grouped = asyncio.run(measure_omni(bc.GROUPED, args.requests, args.load_requests))
    http = None if args.skip_http else measure_omni_http(args.load_requests)
    ceiling = None if args.skip_http else bc.client_ceiling(CONCURRENCIES, args.load_requests)

    reason = "skipped by --skip-ray" if args.skip_ray else bc.ray_missing()
    serve = core = None
    if reason is None:
        import ray

        bc.ray_init()
        try:
            core_hops, core_loads = bc.measure_ray_core(CONCURRENCIES, args.load_requests, args.requests)
            serve_hops, serve_loads, serve_http = bc.measure_ray_serve(CONCURRENCIES, args.load_requests, args.requests)
            core, serve = (core_hops, core_loads), (serve_hops, serve_loads, serve_http)
        finally:
            ray.shutdown()
    else:
        notes.append(f"Ray baselines skipped: {reason}; run `nox -s bench_runtime` to install ray[serve]")

    others = {}
    if serve is not None and core is not None:
        others = {"Ray Serve": serve[0], "Ray core": core[0]}
    rows += hop_rows(split, grouped, others)
    rows += bc.load_rows("(c) omni split vs grouped", split.loads, grouped.loads, "grouped", None)
    if serve is not None and core is not None:
        rows += bc.load_rows("(c) omni submit vs Ray Serve handle", split.loads, serve[1], "serve", THROUGHPUT_TARGET)
        rows += bc.load_rows("(c) omni submit vs Ray core chain", split.loads, core[1], "core", None)
        if http is not None:
            rows += bc.load_rows("(c) omni HTTP vs Ray Serve HTTP", http, serve[2], "serve", THROUGHPUT_TARGET)
            rows += bc.ceiling_rows("(c) Ray Serve HTTP vs the client", serve[2], ceiling)
    if http is not None:
        rows += bc.ceiling_rows("(c) omni HTTP vs the client", http, ceiling)

    print(f"runtime benchmark ({os.cpu_count()} CPUs, python {sys.version.split()[0]}, warm-up {bc.WARMUP} requests per point for every contender);"
          " value = omni split into 4 processes unless noted")
    print(bc.render(rows, ["section", "case", "value", "baseline", "ratio", "target", "verdict"]))
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
