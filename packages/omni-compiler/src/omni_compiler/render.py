"""Human and machine renderings of a compiled topology.

The text form starts with the spec's aligned ``process : stages`` table, so what
an operator reads in CI is exactly what the spec documents.
"""

from __future__ import annotations

import json

from .topology import CompiledTopology


def table(topology: CompiledTopology) -> str:
    rows = []
    for process in topology.processes:
        stages = ", ".join(process.stages)
        if process.tp_rank is not None:
            stages += f" (tp rank {process.tp_rank} of {process.tp_size})"
        rows.append((process.name, stages))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)} : {stages}" for name, stages in rows)


def text(topology: CompiledTopology) -> str:
    parts = [table(topology)]
    replicated = [p for p in topology.processes if p.num_replicas > 1 or p.replicated_by]
    if replicated:
        lines = ["", "replicas:"]
        for process in replicated:
            instances = topology.instances_of(process.name)
            listed = ", ".join(f"{i.name} ({_gpus(i.gpus)})" for i in instances)
            lines.append(f"  {process.name}: {process.num_replicas} replica(s) -> {listed}")
        parts.append("\n".join(lines))
    tp_stages = [s for s in topology.stages if s.tp_size > 1]
    if tp_stages:
        lines = ["", "tensor parallel:"]
        for stage in tp_stages:
            ranks = [p.name for p in topology.processes if p.tp_rank is not None and stage.name in p.stages]
            lines.append(f"  {stage.name}: tp_size {stage.tp_size}, one OS process per rank: {', '.join(ranks)}")
        parts.append("\n".join(lines))
    ray_placed = [p for p in topology.processes if p.ray]
    if ray_placed:
        lines = ["", "ray placement (used by --backend ray):"]
        for process in ray_placed:
            asks = ", ".join(f"{key} {_plain_map(value)}" for key, value in process.ray.items())
            lines.append(f"  {process.name}: {asks}")
        parts.append("\n".join(lines))
    cross = topology.cross_process_edges
    lines = ["", f"cross-process edges ({len(cross)}):"]
    if cross:
        edge_width = max(len(f"{e.src} -> {e.dst}") for e in cross)
        kind_width = max(len(", ".join(e.kinds)) for e in cross)
        for edge in cross:
            src = "/".join(topology.processes_of(edge.src))
            dst = "/".join(topology.processes_of(edge.dst))
            lines.append(f"  {f'{edge.src} -> {edge.dst}'.ljust(edge_width)}  {', '.join(edge.kinds).ljust(kind_width)}  {src} -> {dst}")
    else:
        lines.append("  none: every handoff stays inside one OS process")
    parts.append("\n".join(lines))
    lines = ["", "GPU budget:"]
    if topology.gpus:
        rows = [("gpu", "processes", "declared fractions", "total", "limit")]
        for budget in topology.gpus:
            fractions = ", ".join(
                f"{s.instance}/{s.stage}{'' if s.tp_rank is None else f'[tp{s.tp_rank}]'}={'-' if s.memory_fraction is None else f'{s.memory_fraction:g}'}"
                for s in budget.shares
            )
            rows.append((str(budget.gpu), ", ".join(budget.processes), fractions, f"{budget.total:g}", f"{budget.limit:g}"))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for row in rows:
            lines.append("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    else:
        lines.append("  no GPU stages")
    parts.append("\n".join(lines))
    return "\n".join(parts)


def _gpus(ids: tuple[int, ...]) -> str:
    if not ids:
        return "CPU"
    return "GPU " + ",".join(str(i) for i in ids)


def to_json(topology: CompiledTopology) -> str:
    data = {"valid": True, "table": table(topology).splitlines(), "topology": topology.to_dict()}
    return json.dumps(data, indent=2)


def _node_id(name: str) -> str:
    return "n_" + "".join(ch if ch.isalnum() else "_" for ch in name)


def mermaid(topology: CompiledTopology) -> str:
    lines = ["flowchart LR"]
    for process in topology.processes:
        lines.append(f'  subgraph {_node_id("p_" + process.name)}["{process.name}"]')
        for stage in process.stages:
            suffix = f"_tp{process.tp_rank}" if process.tp_rank is not None else ""
            lines.append(f'    {_node_id(stage + suffix)}["{stage}"]')
        lines.append("  end")
    for edge in topology.edges:
        for src in _stage_nodes(topology, edge.src):
            for dst in _stage_nodes(topology, edge.dst):
                arrow = "==>" if "stream_to" in edge.kinds else ("-.->" if edge.kinds == ("wait_for",) else "-->")
                label = ", ".join(edge.kinds) + (" (cross-process)" if edge.cross_process else "")
                lines.append(f'  {src} {arrow}|"{label}"| {dst}')
    return "\n".join(lines)


def dot(topology: CompiledTopology) -> str:
    lines = [f'digraph "{topology.name or "pipeline"}" {{', "  rankdir=LR;", "  node [shape=box];"]
    for index, process in enumerate(topology.processes):
        lines.append(f'  subgraph cluster_{index} {{ label="{process.name}";')
        for stage in process.stages:
            suffix = f"_tp{process.tp_rank}" if process.tp_rank is not None else ""
            lines.append(f'    {_node_id(stage + suffix)} [label="{stage}"];')
        lines.append("  }")
    for edge in topology.edges:
        for src in _stage_nodes(topology, edge.src):
            for dst in _stage_nodes(topology, edge.dst):
                style = "bold" if "stream_to" in edge.kinds else ("dashed" if edge.kinds == ("wait_for",) else "solid")
                color = "red" if edge.cross_process else "black"
                lines.append(f'  {src} -> {dst} [label="{", ".join(edge.kinds)}", style={style}, color={color}];')
    lines.append("}")
    return "\n".join(lines)


def _stage_nodes(topology: CompiledTopology, stage: str) -> list[str]:
    nodes = []
    for process in topology.processes:
        if stage in process.stages:
            suffix = f"_tp{process.tp_rank}" if process.tp_rank is not None else ""
            nodes.append(_node_id(stage + suffix))
    return nodes


def _plain_map(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v:g}" if isinstance(v, float) else f"{k}: {v}" for k, v in value.items()) + "}"
    return f"{value:g}" if isinstance(value, float) else str(value)
