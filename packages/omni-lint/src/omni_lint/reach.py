"""Stage attribution: everything a stage's factory can reach, and the state it touches.

Starting from the factory (and the stage's merge_fn / route_fn, which run in
the same process) the walk follows called and referenced functions, nested
functions and returned closures, lambdas, and every effective method of each
class the code instantiates or names (so a base class's template method and
the subclass hook it calls are both in). Over-approximating reachability is
deliberate: a missed access hides a broken handoff, an extra one is visible in
the message and can be suppressed.
"""

from __future__ import annotations

from dataclasses import dataclass

from .bodies import Access, Analyzer
from .project import ClassSym, FuncSym, Sym
from .scan import ClassKey, FuncKey, StateKey


@dataclass(frozen=True)
class StageUse:
    """The first write and the first read of one state by one stage (None when absent)."""

    write: Access | None
    read: Access | None


def _first(current: Access | None, candidate: Access) -> Access:
    if current is None:
        return candidate
    return min(current, candidate, key=lambda a: (a.path, a.line, a.col))


def stage_uses(analyzer: Analyzer, starts: list[Sym]) -> dict[StateKey, StageUse]:
    project = analyzer.project
    pending: list[FuncKey | ClassKey] = []
    for sym in starts:
        if isinstance(sym, FuncSym):
            pending.append(sym.key)
        elif isinstance(sym, ClassSym):
            pending.append(sym.key)
    seen: set[FuncKey | ClassKey] = set()
    writes: dict[StateKey, Access] = {}
    reads: dict[StateKey, Access] = {}
    while pending:
        item = pending.pop()
        if item in seen:
            continue
        seen.add(item)
        if isinstance(item, ClassKey):
            pending.extend(project.effective_methods(item))
            continue
        facts = analyzer.facts(item)
        for access in facts.accesses:
            if not isinstance(access.key, StateKey):
                continue
            if access.kind == "write":
                writes[access.key] = _first(writes.get(access.key), access)
            elif access.kind == "read":
                reads[access.key] = _first(reads.get(access.key), access)
        pending.extend(facts.reaches)
    return {key: StageUse(writes.get(key), reads.get(key)) for key in sorted(set(writes) | set(reads))}
