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

import libcst as cst

from .analyzer import Analyzer
from .facts import Access
from .scan import ClassKey, FuncKey, StateKey
from .source import ParsedFile
from .symbols import ClassSym, FuncSym, Sym

#: writes that tear down (cleanup after an abort) rather than publish
_TEARDOWN = {"del", "call:clear", "call:remove", "call:discard", "call:pop", "call:popitem", "call:popleft"}
#: reads that take the value for use (the consumer side of a handoff)
_CONSUMING = {"subscript", "call:pop", "call:popleft", "call:popitem", "call:get", "call:get_nowait", "call:take", "call:consume", "call:dequeue"}


def _write_rank(access: Access) -> tuple:
    return (access.form in _TEARDOWN, access.path, access.line, access.col)


def _read_rank(access: Access) -> tuple:
    rank = 0 if access.form in _CONSUMING or access.form.startswith("call:") else 2 if access.form == "probe" else 1
    return (rank, access.path, access.line, access.col)


@dataclass(frozen=True)
class StageUse:
    """Every write and read of one state by one stage (positions are resolved only for messages)."""

    writes: tuple[Access, ...]
    reads: tuple[Access, ...]
    #: get-or-compute accesses (a miss recomputes): a publisher only for stages that plainly read
    fills: tuple[Access, ...] = ()
    #: writes made while the stage's factory runs (before it serves): its own per-process setup
    setup_writes: frozenset[int] = frozenset()

    @property
    def write(self) -> Access | None:
        """The write that publishes (a store, a put), before teardown (``del``, ``clear``, ``pop``)."""
        candidates = self.writes or self.fills
        return min(candidates, key=_write_rank) if candidates else None

    @property
    def read(self) -> Access | None:
        """The read that consumes (a ``pop``, a subscript, a ``get``), before membership probes."""
        return min(self.reads, key=_read_rank) if self.reads else None


@dataclass(frozen=True)
class StageReach:
    """What a stage's code touches, and the calls on its path the analysis could not follow."""

    uses: dict[StateKey, StageUse]
    unresolved: tuple[tuple[ParsedFile, cst.Call], ...]


def stage_uses(analyzer: Analyzer, starts: list[Sym]) -> StageReach:
    project = analyzer.project
    pending: list[FuncKey | ClassKey] = []
    for sym in starts:
        if isinstance(sym, (FuncSym, ClassSym)):
            pending.append(sym.key)
    seen: set[FuncKey | ClassKey] = set()
    writes: dict[StateKey, list[Access]] = {}
    reads: dict[StateKey, list[Access]] = {}
    fills: dict[StateKey, list[Access]] = {}
    unresolved: list[tuple[ParsedFile, cst.Call]] = []
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
            elif access.kind == "cache":
                fills.setdefault(access.key, []).append(access)
        pending.extend(facts.reaches)
        unresolved.extend(facts.unresolved)
    setup = _setup_writes(analyzer, starts)
    uses = {
        key: StageUse(tuple(writes.get(key, ())), tuple(reads.get(key, ())), tuple(fills.get(key, ())), frozenset(setup.get(key, ())))
        for key in sorted(set(writes) | set(reads) | set(fills))
    }
    return StageReach(uses, tuple(unresolved))


def _setup_writes(analyzer: Analyzer, starts: list[Sym]) -> dict[StateKey, set[int]]:
    """Writes (node ids) made while the factory itself runs: its body and what it calls directly,
    not the closures and lambdas it returns (those run when the stage serves)."""
    project = analyzer.project
    pending: list[FuncKey] = []
    for sym in starts:
        if isinstance(sym, FuncSym):
            pending.append(sym.key)
        elif isinstance(sym, ClassSym):
            init = project.class_member(sym.key, "__init__")
            if isinstance(init, FuncSym):
                pending.append(init.key)
    seen: set[FuncKey] = set()
    found: dict[StateKey, set[int]] = {}
    while pending:
        key = pending.pop()
        if key in seen:
            continue
        seen.add(key)
        facts = analyzer.facts(key)
        for access in facts.accesses:
            if isinstance(access.key, StateKey) and access.kind == "write" and not access.deferred and access.form != "arg":
                found.setdefault(access.key, set()).add(id(access.node))
        pending.extend(facts.calls)
    return found
