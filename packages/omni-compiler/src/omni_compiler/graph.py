"""Steps 4-6: edges, the process-local contract and graph sanity.

A contract entry that names an unknown stage or a non-edge is an error, so a
typo can never silently disable a guard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_config import ConfigIssue
from omni_config.suggest import did_you_mean

from .topology import CompiledEdge, CompiledProcess

if TYPE_CHECKING:
    from omni_config import PipelineConfig

EDGE_KINDS = ("next", "stream_to", "wait_for")


def check_names(config: PipelineConfig, issues: list[ConfigIssue]) -> set[str]:
    names: set[str] = set()
    for stage in config.stages:
        if stage.name in names:
            issues.append(ConfigIssue(f"stages.{stage.name}", "stage names must be unique; this name is declared twice", "rename or remove one of the two stages", value=stage.name))
        names.add(stage.name)
    if config.entry_stage is not None and config.entry_stage not in names:
        issues.append(ConfigIssue("entry_stage", "names no stage", did_you_mean(config.entry_stage, names, "stage names"), value=config.entry_stage))
    for stage in config.stages:
        for kind in EDGE_KINDS:
            for target in getattr(stage, kind):
                if target not in names:
                    issues.append(ConfigIssue(f"stages.{stage.name}.{kind}", f"references unknown stage '{target}'", did_you_mean(target, names, "stage names"), value=target))
        if stage.wait_for and not stage.merge_fn:
            issues.append(ConfigIssue(f"stages.{stage.name}.merge_fn", f"stage '{stage.name}' waits for {', '.join(stage.wait_for)} but declares no merge_fn to combine their payloads",
                                      "add merge_fn: 'pkg.module:function' taking {stage: payload} and returning one payload"))
        if stage.terminal and stage.next:
            issues.append(ConfigIssue(f"stages.{stage.name}.next", "a terminal stage completes the request, so it cannot also pass its payload on", f"remove next from {stage.name} or set terminal: false", value=list(stage.next)))
        if not stage.terminal and not stage.next:
            issues.append(ConfigIssue(f"stages.{stage.name}.next", "the stage neither passes its payload on (next) nor completes the request (terminal), so its requests would never finish",
                                      f"add next: <stage> or terminal: true to {stage.name}"))
    return names


def build_edges(config: PipelineConfig, processes: tuple[CompiledProcess, ...], names: set[str]) -> tuple[CompiledEdge, ...]:
    kinds: dict[tuple[str, str], list[str]] = {}
    for stage in config.stages:
        for kind in ("next", "stream_to"):
            for target in getattr(stage, kind):
                if target in names:
                    _add(kinds, (stage.name, target), kind)
        for source in stage.wait_for:
            if source in names:
                _add(kinds, (source, stage.name), "wait_for")
    groups = _groups_by_stage(processes)
    reasons = {(e.src, e.dst): e.reason for e in config.process_local_edges}
    edges = []
    for (src, dst), edge_kinds in kinds.items():
        ordered = tuple(k for k in EDGE_KINDS if k in edge_kinds)
        cross = groups.get(src) != groups.get(dst) or len(groups.get(src, ())) != 1
        edges.append(CompiledEdge(src, dst, ordered, cross, reasons.get((src, dst))))
    return tuple(edges)


def _add(kinds: dict[tuple[str, str], list[str]], key: tuple[str, str], kind: str) -> None:
    bucket = kinds.setdefault(key, [])
    if kind not in bucket:
        bucket.append(kind)


def _groups_by_stage(processes: tuple[CompiledProcess, ...]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for process in processes:
        for stage in process.stages:
            out.setdefault(stage, []).append(process.name)
    return {k: tuple(v) for k, v in out.items()}


def check_contract(config: PipelineConfig, edges: tuple[CompiledEdge, ...], processes: tuple[CompiledProcess, ...], names: set[str], issues: list[ConfigIssue]) -> None:
    by_pair = {(e.src, e.dst): e for e in edges}
    groups = _groups_by_stage(processes)
    size = {p.name: len(p.stages) for p in processes}
    tp = {s.name for s in config.stages if s.tp_size > 1}
    seen: set[tuple[str, str]] = set()
    for entry in config.process_local_edges:
        label = f"process_local_edges.{entry.src}->{entry.dst}"
        if (entry.src, entry.dst) in seen:
            issues.append(ConfigIssue(label, "the edge is listed twice in the contract", "remove the duplicate entry", value=f"{entry.src} -> {entry.dst}"))
            continue
        seen.add((entry.src, entry.dst))
        unknown = False
        for end in ("src", "dst"):
            name = getattr(entry, end)
            if name not in names:
                unknown = True
                issues.append(ConfigIssue(f"{label}.{end}", "the process-local contract names an unknown stage, which would silently disable this guard", did_you_mean(name, names, "stage names"), value=name))
        if unknown:
            continue
        edge = by_pair.get((entry.src, entry.dst))
        if edge is None:
            outgoing = sorted(dst for (src, dst) in by_pair if src == entry.src)
            listing = ", ".join(f"{entry.src} -> {d}" for d in outgoing) or f"none from {entry.src}"
            issues.append(ConfigIssue(label, f"the process-local contract names an edge that does not exist (edges from {entry.src}: {listing})",
                                      "correct src/dst to an edge built from next, stream_to or wait_for, or remove the entry", value=f"{entry.src} -> {entry.dst}"))
            continue
        if not edge.cross_process or entry.src not in groups or entry.dst not in groups:
            continue  # not split, or a stage left without a process by an error grouping already reported
        src_groups, dst_groups = groups[entry.src], groups[entry.dst]
        where = f"{entry.src} runs in {_describe(src_groups)} and {entry.dst} in {_describe(dst_groups)}"
        rule = f"the edge {entry.src} -> {entry.dst} must stay inside one OS process ({entry.reason}), but {where}"
        if entry.src in tp or entry.dst in tp:
            tp_stage = entry.dst if entry.dst in tp else entry.src
            issues.append(ConfigIssue(f"stages.{tp_stage}.tp_size", rule + f"; tensor parallelism gives {tp_stage} its own process per rank",
                                      f"--stages.{tp_stage}.tp_size 1 (or drop tensor parallelism for {tp_stage})", value=config.stage(tp_stage).tp_size))
            continue
        src_process, dst_process = src_groups[0], dst_groups[0]
        if size.get(src_process, 0) < size.get(dst_process, 0):
            moved, target = entry.src, dst_process
        else:
            moved, target = entry.dst, src_process
        issues.append(ConfigIssue(f"stages.{moved}.process", rule, f"--stages.{moved}.process {target}  (or set process: {target} on {moved} in your deployment file)",
                                  value=config.stage(moved).process or moved))


def _describe(groups: tuple[str, ...]) -> str:
    return f"'{groups[0]}'" if len(groups) == 1 else "TP rank processes " + ", ".join(f"'{g}'" for g in groups)


def check_graph(config: PipelineConfig, edges: tuple[CompiledEdge, ...], names: set[str], issues: list[ConfigIssue]) -> None:
    entry = config.entry
    if entry not in names:
        return
    adjacency: dict[str, list[str]] = {n: [] for n in names}
    for edge in edges:
        adjacency[edge.src].append(edge.dst)
    kinds = {(edge.src, edge.dst): edge.kinds for edge in edges}
    for cycle in _cycles(config.stage_names, adjacency) if _has_cycle(adjacency) else ():
        shown = " -> ".join((*cycle, cycle[0]))
        issues.append(ConfigIssue(_edge_field(cycle[-1], cycle[0], kinds[(cycle[-1], cycle[0])]), f"the stages form a cycle ({shown}), so a request could never finish", f"remove the edge {cycle[-1]} -> {cycle[0]}", value=cycle[0]))
    reachable = _reach(entry, adjacency)
    for stage in config.stages:
        if stage.name not in reachable:
            issues.append(ConfigIssue(f"stages.{stage.name}", f"unreachable from the entry stage '{entry}'", "wire it from a reachable stage with next, or remove it", value=stage.name))
    terminal = {s.name for s in config.stages if s.terminal}
    if not reachable & terminal:
        issues.append(ConfigIssue("stages", f"no terminal stage is reachable from the entry stage '{entry}', so no request could complete", "mark the last stage terminal: true"))


def _edge_field(src: str, dst: str, kinds: tuple[str, ...]) -> str:
    """The config field that declares an edge: src's next/stream_to, or dst's wait_for."""
    if "next" in kinds or "stream_to" in kinds:
        return f"stages.{src}.{'next' if 'next' in kinds else 'stream_to'}"
    return f"stages.{dst}.wait_for"


def _has_cycle(adjacency: dict[str, list[str]]) -> bool:
    """Kahn's algorithm: O(V + E), and most pipelines are DAGs, so the full search rarely runs."""
    indegree = dict.fromkeys(adjacency, 0)
    for targets in adjacency.values():
        for target in targets:
            indegree[target] += 1
    ready = [n for n, d in indegree.items() if d == 0]
    removed = 0
    while ready:
        node = ready.pop()
        removed += 1
        for target in adjacency[node]:
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    return removed != len(adjacency)


def _reach(start: str, adjacency: dict[str, list[str]]) -> set[str]:
    seen = {start}
    stack = [start]
    while stack:
        for nxt in adjacency[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _cycles(order: tuple[str, ...], adjacency: dict[str, list[str]]) -> list[tuple[str, ...]]:
    """One representative cycle per strongly connected component (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[tuple[str, ...]] = []
    counter = 0
    for root in order:
        if root in index:
            continue
        work = [(root, iter(adjacency[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(adjacency[nxt])))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in adjacency[node]:
                    found.append(_cycle_path(set(component), adjacency, order))
    return found


def _cycle_path(component: set[str], adjacency: dict[str, list[str]], order: tuple[str, ...]) -> tuple[str, ...]:
    start = next(n for n in order if n in component)
    path = [start]
    seen = {start}
    node = start
    while True:
        nxt = next((n for n in adjacency[node] if n in component), None)
        if nxt is None or nxt == start:
            return tuple(path)
        if nxt in seen:
            return tuple(path[path.index(nxt):])
        path.append(nxt)
        seen.add(nxt)
        node = nxt
