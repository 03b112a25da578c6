"""``omni topology --backend ray``: where each process instance really landed, and how each hop travels.

Placement is Ray's decision, so the only truthful answer comes from starting
the run: every instance is started on the cluster, asked for its node and
devices, and stopped again. The report lists, per instance, the node (its id
and the custom resources it offers), address, pid and the GPUs Ray assigned
with the config's logical id each one stands for; then, per pair of processes
that exchange messages, the transport (``ipc + shm`` on one node, ``tcp``
across nodes).
"""

from __future__ import annotations

import json
from typing import Any

from ..transport.tcp import IPC

_BUILTIN = ("CPU", "GPU", "memory", "object_store_memory")


def node_labels() -> dict[str, str]:
    """Node id -> the custom resources it offers (``node_a``), the names operators recognise."""
    import ray

    out = {}
    for node in ray.nodes():
        custom = sorted(k for k in node.get("Resources", {}) if k not in _BUILTIN and not k.startswith(("node:", "accelerator_type:")) and "_group_" not in k)
        out[node["NodeID"]] = ",".join(custom) or "-"
    return out


async def placed_topology(runtime: Any, fmt: str = "text") -> str:
    """Start ``runtime`` (backend ray), describe where everything runs, shut it down."""
    from omni_compiler import render

    await runtime.start()
    try:
        placements = await runtime.placements()
        edges = runtime.edge_transports()
        labels = node_labels()
    finally:
        await runtime.shutdown()
    rows = []
    for instance in runtime.topology.instances:
        placed = placements.get(instance.name, {})
        node = str(placed.get("node_id", ""))
        gpu_map = placed.get("gpu_map") or {}
        gpus = placed.get("gpus") or []
        devices = ", ".join(f"{logical} -> {gpus[local] if local < len(gpus) else '?'}" for logical, local in sorted(gpu_map.items())) or "-"
        rows.append({
            "instance": instance.name,
            "node_id": node,
            "node": labels.get(node, "?"),
            "host": placed.get("host", "?"),
            "pid": placed.get("pid"),
            "gpus": devices,
        })
    hops = [{"src": src, "dst": dst, "transport": "ipc + shm" if how == IPC else how} for (src, dst), how in edges.items()]
    if fmt == "json":
        return json.dumps({"run_id": runtime.run_id, "instances": rows, "edges": hops}, indent=2)
    lines = [render.table(runtime.topology), "", f"placed on Ray (run {runtime.run_id}):"]
    header = ("instance", "node", "resources", "address", "pid", "GPUs (config -> Ray)")
    table = [header] + [(r["instance"], r["node_id"][:12], r["node"], r["host"], str(r["pid"]), r["gpus"]) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    lines += ["", "hops:"]
    width = max((len(f"{h['src']} -> {h['dst']}") for h in hops), default=0)
    lines += [f"  {(h['src'] + ' -> ' + h['dst']).ljust(width)}  {h['transport']}" for h in hops]
    return "\n".join(lines)
