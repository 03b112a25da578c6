"""Ray backend benchmark: the same 4-stage no-op pipeline on the local backend, on Ray (one node,
two nodes) and as a Ray Serve application; TCP vs IPC hops and bandwidth.

Prints one table; every ratio is measured in this run, on this machine.

(a) requests/s and p50 at concurrency 1 and 64 through ``Runtime.submit``:
    * ``local``: the local backend, one spawned process per stage;
    * ``ray 1 node``: ``backend="ray"``, every actor on the node of the parent
      (a real Ray cluster on 127.0.0.1; the head offers the resource ``head``);
    * ``ray 2 nodes``: s1, s2 on node_a and s3, s4 on node_b (s2 -> s3 and the
      parent's two hops cross nodes over TCP);
    * Ray Serve: the same stages as deployments chained by an ingress
      (``bench_common.measure_ray_serve``), through its handle.
    Goals: ray 1 node within 1.3x of local (the data plane is the same) and
    >= 3x Ray Serve.
(b) hop latency p50/p99: the s2 -> s3 hop on one node (IPC) vs across nodes
    (TCP), from the stages' own timestamps.
(c) bandwidth at 16 MiB through the runtime's async plane: IPC + shared memory
    vs TCP (``runtime_bench_transport.transport_rows``).

The same warm-up for every contender (``bench_common.WARMUP`` requests before
each measured point). Usage: ``python benchmarks/ray_bench.py [--requests N]
[--load-requests N]`` (``nox -s bench_ray`` installs ``omni-runtime[ray]`` and ``ray[serve]``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_common as bc  # noqa: E402
import runtime_bench_transport as transport  # noqa: E402
from runtime_bench import CONCURRENCIES, Measured, measure_omni  # noqa: E402

WITHIN_LOCAL = 1.3
OVER_SERVE = 3.0
MiB = 1 << 20
ONE_NODE = {name: {"resources": {"head": 1}} for name in bc.SPLIT}
TWO_NODES = {"s1": {"resources": {"node_a": 1}}, "s2": {"resources": {"node_a": 1}}, "s3": {"resources": {"node_b": 1}}, "s4": {"resources": {"node_b": 1}}}


def measure_on_cluster(hop_requests: int, load_requests: int) -> tuple[Measured, Measured]:
    from omni_runtime.raycluster.local import local_cluster

    nodes = {"node_a": {"node_a": 8}, "node_b": {"node_b": 8}}
    with local_cluster(nodes, head_cpus=1, head_resources={"head": 8}):
        one = asyncio.run(measure_omni(bc.SPLIT, hop_requests, load_requests, backend="ray", ray_placement=ONE_NODE))
        two = asyncio.run(measure_omni(bc.SPLIT, hop_requests, load_requests, backend="ray", ray_placement=TWO_NODES))
    return one, two


def hop_rows(one: Measured, two: Measured) -> list[list[str]]:
    rows = []
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        ipc, tcp = bc.pct(one.hops_us["s2->s3"], q), bc.pct(two.hops_us["s2->s3"], q)
        rows.append(["(b) hop s2->s3", f"tcp {label}", bc.us(tcp), f"ipc {bc.us(ipc)}", f"{tcp / ipc:.2f}x", "", ""])
    for hop in ("submit->s1", "s4->result"):
        ipc, tcp = bc.pct(one.hops_us[hop], 0.5), bc.pct(two.hops_us[hop], 0.5)
        rows.append(["(b) parent hop", f"{hop} p50", bc.us(tcp), f"ipc {bc.us(ipc)}", f"{tcp / ipc:.2f}x", "parent on the head node", ""])
    return rows


def bandwidth_rows(trials: int) -> list[list[str]]:
    ipc = transport.transport_rows(sizes=(16 * MiB,), trials=trials, transport="ipc")[0]
    tcp = transport.transport_rows(sizes=(16 * MiB,), trials=trials, transport="tcp")[0]
    return [
        ["(c) 16 MiB bandwidth", "tcp", f"{tcp['copy_gbs']:.3g} GB/s", f"ipc+shm {ipc['copy_gbs']:.3g} GB/s", f"{tcp['copy_gbs'] / ipc['copy_gbs']:.2f}x", f"clone {ipc['clone_gbs']:.3g} GB/s", ""],
        ["(c) 16 MiB bandwidth", "tcp vs clone", f"{tcp['copy_ratio']:.2f}x", f"ipc+shm {ipc['copy_ratio']:.2f}x", "", "", ""],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500, help="sequential requests for the hop latencies (default: %(default)s)")
    parser.add_argument("--load-requests", type=int, default=1000, help="requests per throughput point (default: %(default)s)")
    parser.add_argument("--transport-trials", type=int, default=3, help="best-of rounds for (c) (default: %(default)s)")
    args = parser.parse_args(argv)
    reason = bc.ray_missing()
    if reason is not None:
        print(f"error: Ray is not importable ({reason}); run `nox -s bench_ray` (installs omni-runtime[ray] and ray[serve])", file=sys.stderr)
        return 2
    os.environ.update(bc.LOOPBACK_ENV)
    local = asyncio.run(measure_omni(bc.SPLIT, args.requests, args.load_requests))
    one, two = measure_on_cluster(args.requests, args.load_requests)
    import ray

    bc.ray_init()
    try:
        _hops, serve_loads, _http = bc.measure_ray_serve(CONCURRENCIES, args.load_requests, hop_requests=10, http=False)
    finally:
        ray.shutdown()
    rows = []
    rows += bc.load_rows("(a) ray 1 node vs local", one.loads, local.loads, "local", WITHIN_LOCAL, higher=False)
    rows += bc.load_rows("(a) ray 2 nodes vs local", two.loads, local.loads, "local", None)
    rows += bc.load_rows("(a) ray 1 node vs Ray Serve", one.loads, serve_loads, "serve", OVER_SERVE)
    rows += bc.load_rows("(a) ray 2 nodes vs Ray Serve", two.loads, serve_loads, "serve", OVER_SERVE)
    rows += hop_rows(one, two)
    rows += bandwidth_rows(args.transport_trials)
    print(f"ray backend benchmark ({os.cpu_count()} CPUs, python {sys.version.split()[0]}, warm-up {bc.WARMUP} requests per point for every contender);"
          " every Ray node on 127.0.0.1")
    print(bc.render(rows, ["section", "case", "value", "baseline", "ratio", "target", "verdict"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
