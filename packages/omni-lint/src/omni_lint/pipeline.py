"""A pipeline file as the linter needs it: stages, their code entry points, the
graph and the declared process-local contract, plus line numbers.

The file is loaded with omni-config exactly as the runtime loads it (layering,
``extends:``, schema), so the linter never disagrees with the runtime about what
a pipeline is. Line numbers come from a second, position-keeping YAML pass,
because the validated config no longer knows where its values came from.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .findings import Finding, Severity


@dataclass(frozen=True)
class StageView:
    name: str
    factory: str
    merge_fn: str | None
    route_fn: str | None
    line: int
    col: int = 1


@dataclass(frozen=True)
class DeclaredEdge:
    src: str
    dst: str
    reason: str
    line: int
    col: int

    @property
    def label(self) -> str:
        return f"{self.src} -> {self.dst}"


@dataclass(frozen=True)
class PipelineView:
    path: Path
    stages: tuple[StageView, ...]
    #: Directed edges of the pipeline: next, stream_to and wait_for (source -> waiting stage).
    edges: frozenset[tuple[str, str]]
    declared: tuple[DeclaredEdge, ...]
    #: True when the file ``extends:`` another one (its result then depends on more than this file)
    extends: bool = False

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)

    def declared_path(self, a: str, b: str) -> list[tuple[str, str]] | None:
        """Declared edges (as declared) joining ``a`` and ``b``, ignoring direction; None if not joined."""
        adjacency: dict[str, list[tuple[str, tuple[str, str]]]] = {}
        for edge in self.declared:
            adjacency.setdefault(edge.src, []).append((edge.dst, (edge.src, edge.dst)))
            adjacency.setdefault(edge.dst, []).append((edge.src, (edge.src, edge.dst)))
        return _bfs(a, b, adjacency)

    def pipeline_path(self, a: str, b: str) -> list[tuple[str, str]] | None:
        """Shortest directed pipeline path from ``a`` to ``b`` as edges; None if ``b`` is unreachable."""
        adjacency: dict[str, list[tuple[str, tuple[str, str]]]] = {}
        for src, dst in sorted(self.edges):
            adjacency.setdefault(src, []).append((dst, (src, dst)))
        return _bfs(a, b, adjacency)


def _bfs(a: str, b: str, adjacency: dict[str, list[tuple[str, tuple[str, str]]]]) -> list[tuple[str, str]] | None:
    if a == b:
        return []
    previous: dict[str, tuple[str, tuple[str, str]]] = {}
    queue = deque([a])
    seen = {a}
    while queue:
        node = queue.popleft()
        for neighbour, edge in adjacency.get(node, ()):
            if neighbour in seen:
                continue
            seen.add(neighbour)
            previous[neighbour] = (node, edge)
            if neighbour == b:
                path = []
                while neighbour != a:
                    neighbour, edge = previous[neighbour]
                    path.append(edge)
                return list(reversed(path))
            queue.append(neighbour)
    return None


class PipelineLoadFailed(Exception):
    """The pipeline file could not be loaded; carries the findings that say why."""

    def __init__(self, findings: list[Finding]):
        self.findings = findings
        super().__init__("; ".join(f.message for f in findings))


def load_pipeline(path: Path, display: str) -> PipelineView:
    """Load ``path`` through omni-config; raise :class:`PipelineLoadFailed` with OL901 findings."""
    from omni_config import ConfigError, ConfigFileError, load_config

    positions = YamlPositions.from_file(path)
    try:
        config = load_config(path)
    except ConfigError as exc:
        findings = []
        for issue in exc.issues:
            line, col = positions.locate(issue.path)
            text = f"{issue.path}"
            if issue.has_value:
                from omni_config.errors import format_value

                text += f" = {format_value(issue.value)}"
            text += f": {issue.rule}; fix: {issue.fix}"
            if issue.source and issue.source != str(path):
                text += f" (in {issue.source})"
            findings.append(Finding(display, line, col, "OL901", f"pipeline file does not load: {text}", Severity.ERROR))
        raise PipelineLoadFailed(findings) from None
    except ConfigFileError as exc:
        line, col = _yaml_error_position(exc)
        message = f"pipeline file does not load: {exc.reason}; fix: {exc.fix}"
        raise PipelineLoadFailed([Finding(display, line, col, "OL901", message, Severity.ERROR)]) from None
    except Exception as exc:  # omni-config failing on odd input must not stop the other models
        message = f"pipeline file does not load: omni-config raised {type(exc).__name__}: {exc}"
        raise PipelineLoadFailed([Finding(display, 1, 1, "OL901", message, Severity.ERROR)]) from None
    return view_of(config, path, positions)


def view_of(config: Any, path: Path, positions: YamlPositions | None = None) -> PipelineView:
    """Adapt an omni-config ``PipelineConfig`` (or any object of that shape)."""
    positions = positions or YamlPositions({})
    stages = []
    edges: set[tuple[str, str]] = set()
    for index, stage in enumerate(config.stages):
        line, col = positions.locate(f"stages.{stage.name}", index_hint=("stages", index))
        stages.append(StageView(stage.name, stage.factory, stage.merge_fn, stage.route_fn, line, col))
        for target in [*stage.next, *stage.stream_to]:
            edges.add((stage.name, target))
        for source in stage.wait_for:
            edges.add((source, stage.name))
    declared = []
    for index, edge in enumerate(config.process_local_edges):
        line, col = positions.locate(f"process_local_edges.{index}", index_hint=("process_local_edges", index))
        declared.append(DeclaredEdge(edge.src, edge.dst, edge.reason, line, col))
    extends = _mapping_get(positions.root, "extends") is not None
    return PipelineView(path, tuple(stages), frozenset(edges), tuple(declared), extends)


def _yaml_error_position(exc: Exception) -> tuple[int, int]:
    cause = exc.__cause__ or exc.__context__
    mark = getattr(cause, "problem_mark", None)
    if mark is not None:
        return mark.line + 1, mark.column + 1
    match = re.search(r"line (\d+), column (\d+)", str(exc))
    if match:
        return int(match.group(1)), int(match.group(2))
    return 1, 1


class YamlPositions:
    """Maps config paths (``stages.vocoder.next``, ``process_local_edges.0``) to 1-based line/col."""

    def __init__(self, root: Any):
        self.root = root

    @classmethod
    def from_file(cls, path: Path) -> YamlPositions:
        try:
            text = path.read_text(encoding="utf-8")
            node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            node = None
        return cls(node)

    def locate(self, dotted: str, index_hint: tuple[str, int] | None = None) -> tuple[int, int]:
        node = self.root
        if node is None:
            return 1, 1
        best = node
        if index_hint is not None:
            seq = _mapping_get(node, index_hint[0])
            if isinstance(seq, yaml.SequenceNode) and 0 <= index_hint[1] < len(seq.value):
                found = seq.value[index_hint[1]]
                return found.start_mark.line + 1, found.start_mark.column + 1
        for part in _split(dotted):
            child = None
            if isinstance(node, yaml.MappingNode):
                child = _mapping_get(node, part)
                if child is not None:
                    key = next(k for k, _ in node.value if getattr(k, "value", None) == part)
                    best = key
            elif isinstance(node, yaml.SequenceNode):
                child = _sequence_get(node, part)
                if child is not None:
                    best = child
            if child is None:
                break
            node = child
        return best.start_mark.line + 1, best.start_mark.column + 1


def _split(dotted: str) -> Iterable[str]:
    return [part for part in re.split(r"[.\[\]]+", dotted) if part]


def _mapping_get(node: Any, key: str) -> Any:
    if not isinstance(node, yaml.MappingNode):
        return None
    for key_node, value_node in node.value:
        if getattr(key_node, "value", None) == key:
            return value_node
    return None


def _sequence_get(node: Any, part: str) -> Any:
    if part.isdigit():
        index = int(part)
        return node.value[index] if index < len(node.value) else None
    for item in node.value:
        name = _mapping_get(item, "name")
        if name is not None and getattr(name, "value", None) == part:
            return item
    return None
