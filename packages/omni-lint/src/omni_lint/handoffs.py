"""The contract check: every handoff through module state must be declared.

Declared process-local edges tie stages into one process transitively, so a
handoff between a writer and a reader is safe exactly when the two are
connected through declared edges. Otherwise the error says which edges to
declare (those on the shortest pipeline path between the two stages that are
not declared yet) or, where no pipeline path joins them, that the state must
move into the payload. Declared edges that no handoff needs are information.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .findings import Finding, Severity
from .pipeline import PipelineView
from .reach import StageUse
from .scan import StateDef, StateKey


@dataclass(frozen=True)
class Handoff:
    """An undeclared handoff found in one pipeline variant."""

    key: StateKey
    path: str
    line: int
    col: int
    writer: str
    reader: str
    write: str
    read: str
    definition: str
    variant: str
    #: the pipeline edges to declare; None when no pipeline path joins the two stages (OL002)
    missing: tuple[tuple[str, str], ...] | None


def handoff_findings(handoffs: list[Handoff]) -> list[Finding]:
    """One OL001/OL002 per state and stage pair, naming every variant it occurs in."""
    groups: dict[tuple, list[Handoff]] = {}
    for handoff in handoffs:
        code = "OL002" if handoff.missing is None else "OL001"
        groups.setdefault((code, handoff.key, handoff.writer, handoff.reader), []).append(handoff)
    findings = []
    for (code, key, writer, reader), group in sorted(groups.items(), key=lambda item: repr(item[0])):
        first = group[0]
        head = (
            f"{key.display} ({first.definition}) is written by stage {writer} ({first.write}) "
            f"and read by stage {reader} ({first.read})"
        )
        variants = [h.variant for h in group]
        named = variants[0] if len(variants) == 1 else ", ".join(variants[:-1]) + f" and {variants[-1]}"
        if code == "OL002":
            message = (
                f"{head}, but no pipeline path in {named} joins {writer} and {reader}, so no "
                f"process-local edge can keep this handoff in one process: the state must move into the "
                f"payload (StagePayload.data)"
            )
        else:
            asks = {h.missing for h in group}
            if len(asks) == 1:
                declare = _edges(first.missing or ())
                verb = "does" if len(group) == 1 else "do"
                message = (
                    f"{head}, but {named} {verb} not tie {writer} and {reader} into one process: declare "
                    f"process_local_edges {declare} (edge{'s' if len(first.missing or ()) > 1 else ''} to add), "
                    f"or move the state into the payload (StagePayload.data)"
                )
            else:
                per = "; ".join(f"in {h.variant} declare process_local_edges {_edges(h.missing or ())}" for h in group)
                message = (
                    f"{head}, but {named} do not tie {writer} and {reader} into one process: {per}; "
                    f"or move the state into the payload (StagePayload.data)"
                )
        findings.append(Finding(first.path, first.line, first.col, code, message, Severity.ERROR))
    return findings


def _edges(edges: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{a} -> {b}" for a, b in edges)


@dataclass(frozen=True)
class StageAnalysis:
    """What the linter knows about one stage of one pipeline."""

    name: str
    uses: dict[StateKey, StageUse]
    #: False when a factory could not be followed (unresolved, outside the tree, unparsable)
    complete: bool


def _same_code(writer: StageUse, reader: StageUse) -> bool:
    """Both stages run exactly the writer's writes and the reader's reads in the same functions
    (a shared helper such as a re-entrancy flag or a memo): each stage uses the state on its own,
    nothing is handed over. Not applied to accesses inside methods: every method of an
    instantiated class counts as reached, so equal method sites prove nothing."""
    if any(a.in_method for a in (*writer.writes, *reader.reads)):
        return False
    writer_writes = {id(a.node) for a in writer.writes}
    reader_writes = {id(a.node) for a in reader.writes}
    writer_reads = {id(a.node) for a in writer.reads}
    reader_reads = {id(a.node) for a in reader.reads}
    return writer_writes <= reader_writes and reader_reads <= writer_reads


def _own_context(writer: StageUse, reader: StageUse) -> bool:
    """Per-process context: the writer only sets the state while its factory runs, and the reader's
    own factory sets it too before serving, so in any placement each process reads its own."""
    if not reader.setup_writes or not writer.writes:
        return False
    return all(id(access.node) in writer.setup_writes for access in writer.writes)


def check_pipeline(
    view: PipelineView,
    stages: dict[str, StageAnalysis],
    state_def: Callable[[StateKey], StateDef | None],
    where: Callable[[str, int], str],
    pipeline_label: str,
    handoffs: list[Handoff],
) -> list[Finding]:
    """OL004 for bad declarations, OL100 for unbacked edges; undeclared handoffs go to ``handoffs``
    (:func:`handoff_findings` turns those of every variant into one finding per state and pair)."""
    findings: list[Finding] = []
    declared_pairs = {(edge.src, edge.dst) for edge in view.declared}
    backed: set[tuple[str, str]] = set()
    names = set(view.stage_names)

    for edge in view.declared:
        unknown = [stage for stage in (edge.src, edge.dst) if stage not in names]
        if unknown:
            problem = f"names unknown stage {', '.join(repr(s) for s in unknown)} (stages: {', '.join(view.stage_names)})"
        elif (edge.src, edge.dst) not in view.edges:
            reverse = " (the pipeline edge runs the other way)" if (edge.dst, edge.src) in view.edges else ""
            problem = f"is not an edge of the pipeline{reverse}; declare only next, stream_to or wait_for edges"
        else:
            continue
        findings.append(Finding(str(view.path), edge.line, edge.col, "OL004", f"declared process-local edge {edge.label} {problem}", Severity.ERROR))

    states: set[StateKey] = set()
    for analysis in stages.values():
        states.update(analysis.uses)
    for key in sorted(states):
        definition = state_def(key)
        if definition is None:
            continue
        writers = sorted(name for name, a in stages.items() if a.uses.get(key) and (a.uses[key].writes or a.uses[key].fills))
        readers = sorted(name for name, a in stages.items() if a.uses.get(key) and a.uses[key].reads)
        reported: set[frozenset[str]] = set()
        for writer in writers:
            for reader in readers:
                if writer == reader or frozenset((writer, reader)) in reported:
                    continue
                if _same_code(stages[writer].uses[key], stages[reader].uses[key]):
                    continue
                if _own_context(stages[writer].uses[key], stages[reader].uses[key]):
                    continue
                tied = view.declared_path(writer, reader)
                if tied is not None:
                    backed.update(tied)
                    continue
                reported.add(frozenset((writer, reader)))
                write = stages[writer].uses[key].write
                read = stages[reader].uses[key].read
                assert write is not None and read is not None
                path = view.pipeline_path(writer, reader) or view.pipeline_path(reader, writer)
                missing = None if path is None else tuple(edge for edge in path if edge not in declared_pairs)
                handoffs.append(
                    Handoff(key, definition.path, definition.line, definition.col, writer, reader,
                            where(write.path, write.line), where(read.path, read.line), where(definition.path, definition.line),
                            pipeline_label, missing)
                )

    for edge in view.declared:
        if (edge.src, edge.dst) in backed or edge.src not in names or edge.dst not in names:
            continue
        if not (stages.get(edge.src) and stages[edge.src].complete and stages.get(edge.dst) and stages[edge.dst].complete):
            continue
        message = (
            f"declared process-local edge {edge.label} has no backing state in the code (declared reason: "
            f"{edge.reason!r}); fine for a compatibility guard or a placement constraint, otherwise remove it so "
            f"the stages can be split"
        )
        findings.append(Finding(str(view.path), edge.line, edge.col, "OL100", message, Severity.INFO))
    return findings
