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


def _earliest(accesses: tuple[Access, ...]) -> Access | None:
    if not accesses:
        return None
    return min(accesses, key=lambda a: (a.path, a.line, a.col))


@dataclass(frozen=True)
class StageUse:
    """Every write and read of one state by one stage (positions are resolved only for messages)."""

    writes: tuple[Access, ...]
    reads: tuple[Access, ...]

    @property
    def write(self) -> Access | None:
        return _earliest(self.writes)

    @property
    def read(self) -> Access | None:
        return _earliest(self.reads)


def stage_uses(analyzer: Analyzer, starts: list[Sym]) -> dict[StateKey, StageUse]:
    project = analyzer.project
    pending: list[FuncKey | ClassKey] = []
    for sym in starts:
        if isinstance(sym, (FuncSym, ClassSym)):
            pending.append(sym.key)
    seen: set[FuncKey | ClassKey] = set()
    writes: dict[StateKey, list[Access]] = {}
    reads: dict[StateKey, list[Access]] = {}
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
                writes.setdefault(access.key, []).append(access)
            elif access.kind == "read":
                reads.setdefault(access.key, []).append(access)
        pending.extend(facts.reaches)
    return {key: StageUse(tuple(writes.get(key, ())), tuple(reads.get(key, ()))) for key in sorted(set(writes) | set(reads))}
