"""One model folder's analysis: the unit that runs on a worker core and is cached.

A unit parses every Python file of the folder, loads each pipeline contract,
attributes state to stages and checks the contract. Its result is plain data
(JSON-ready): the raw findings (before settings and suppressions), what each
file it read says about suppressions, and its dependencies: the content digest
of every file it read and the state (file, folder, nothing) of every path it
probed while resolving imports. A later run reuses the result exactly when
those dependencies still hold (see :mod:`omni_lint.cache`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .analyzer import Analyzer
from .contracts import disagreement, read_contracts
from .discovery import ModelFolder, folder_python_files, path_state
from .findings import Finding, Severity
from .handoffs import Handoff, StageAnalysis, check_pipeline, handoff_findings
from .pipeline import PipelineLoadFailed, PipelineView, load_pipeline
from .project import Project
from .reach import StageReach, stage_uses
from .source import ParsedFile, SourceCache, digest_bytes, read_regular
from .suppress import Suppression, scan_python
from .symbols import Sym


@dataclass
class Tracker:
    """The unit's view of the shared source cache: records what it read and probed.

    Frames (:meth:`begin` / :meth:`end`) collect what one memoised computation looked at, so a
    result shared with later units (a function's facts) brings its dependencies along
    (:meth:`replay`), and every unit's record stays exactly what its analysis depended on."""

    sources: SourceCache
    cwd: Path
    read: dict[Path, ParsedFile] = field(default_factory=dict)
    probes: dict[str, str] = field(default_factory=dict)
    _frames: list[tuple[set[Path], dict[str, str]]] = field(default_factory=list)

    @property
    def scans(self) -> dict[tuple[Path, str, str], Any]:
        return self.sources.scans

    @property
    def shared_facts(self) -> dict[Any, Any]:
        return self.sources.facts

    @property
    def shared_modules(self) -> dict[Any, Any]:
        return self.sources.module_files

    def get(self, path: Path) -> ParsedFile:
        parsed = self.sources.get(path)
        self.read[parsed.path] = parsed
        if self._frames:
            self._frames[-1][0].add(parsed.path)
        return parsed

    def display(self, path: str | Path) -> str:
        try:
            return Path(path).relative_to(self.cwd).as_posix()
        except ValueError:
            return Path(path).as_posix()

    def _probe(self, path: Path) -> str:
        key = str(path)
        state = self.probes.get(key)
        if state is None:
            state = self.probes[key] = path_state(path)
        if self._frames:
            self._frames[-1][1][key] = state
        return state

    def is_file(self, path: Path) -> bool:
        return self._probe(path) == "file"

    def is_dir(self, path: Path) -> bool:
        return self._probe(path) == "dir"

    def begin(self) -> None:
        self._frames.append((set(), {}))

    def end(self) -> tuple[frozenset[Path], dict[str, str]]:
        reads, probes = self._frames.pop()
        if self._frames:
            self._frames[-1][0].update(reads)
            self._frames[-1][1].update(probes)
        return frozenset(reads), probes

    def replay(self, deps: tuple[frozenset[Path], dict[str, str]]) -> None:
        reads, probes = deps
        for path in reads:
            self.get(path)
        self.probes.update(probes)
        if self._frames:
            self._frames[-1][1].update(probes)


@dataclass
class RunState:
    """What the units of one run in one process share: parsed files and per-module scans. Each
    unit resolves names in its own project, so what it records as read and probed is exactly
    what its analysis looked at (its cache entry depends on nothing else)."""

    sources: SourceCache
    cwd: Path


def new_run_state(cwd: Path) -> RunState:
    return RunState(SourceCache(), cwd)


def analyse_folder(folder: ModelFolder, excluded: Callable[[Path], bool], state: RunState) -> dict[str, Any]:
    """Analyse one model folder; the result is JSON-ready (see the module docstring).
    Paths inside messages are shown relative to the run's working directory."""
    tracker = Tracker(state.sources, state.cwd)
    projects: dict[Path, tuple[Project, Analyzer]] = {}
    findings: list[Finding] = []
    problems: dict[Path, str] = {}
    listing = folder_python_files(folder.path, excluded, problems)
    for path in listing:
        tracker.get(path)
    cacheable = True
    handoffs: list[Handoff] = []
    unresolved: dict[tuple[str, int], tuple[ParsedFile, Any, list[str]]] = {}
    yaml_views: list[PipelineView] = []
    for pipeline_file in folder.pipeline_files:
        resolved = str(pipeline_file.resolve())
        try:
            view = load_pipeline(pipeline_file, resolved)
        except PipelineLoadFailed as failure:
            findings.extend(failure.findings)
            continue
        cacheable &= not view.extends
        yaml_views.append(view)
        _check_view(tracker, projects, folder, view, tracker.display(resolved), findings, handoffs, unresolved)
    contracts = 0
    if folder.contract_modules:
        project, _ = _project(tracker, projects, folder.import_root)
        modules = [project.module(name) for name in (project.module_name(path) for path in folder.contract_modules) if name]
        found, problems_found = read_contracts(project, [m for m in modules if m is not None], tracker.display)
        findings.extend(problems_found)
        for contract in found:
            assert contract.view is not None
            contracts += 1
            _check_view(tracker, projects, folder, contract.view, contract.label, findings, handoffs, unresolved)
            if yaml_views:
                differs = disagreement(contract, yaml_views, tracker.display)
                if differs is not None:
                    findings.append(differs)
    findings.extend(handoff_findings(handoffs))
    findings.extend(_unresolved_findings(unresolved))
    for project, _analyzer in projects.values():
        findings.extend(project.missing_imports())
    for path, reason in problems.items():
        findings.append(Finding(str(path), 1, 1, "OL900", f"cannot read {path.name}: {reason}", Severity.ERROR))
    files: dict[str, Any] = {}
    for parsed in tracker.read.values():
        if parsed.error is not None:
            line, col, message = parsed.error
            findings.append(Finding(str(parsed.path), line, col, "OL900", f"cannot parse {parsed.path.name}: {message}", Severity.ERROR))
        files[str(parsed.path)] = {"digest": parsed.digest, "comments": _comments(parsed)}
    return {
        "folder": str(folder.path),
        "pipelines": len(folder.pipeline_files) + contracts,
        "findings": [finding_to_json(f) for f in findings],
        "files": files,
        "yaml": {str(p.resolve()): _digest(p) for p in folder.pipeline_files},
        "listing": sorted(str(p) for p in listing),
        "probes": tracker.probes,
        "cacheable": cacheable and not problems,
    }


def _unresolved_findings(unresolved: dict[tuple[str, int], tuple[ParsedFile, Any, list[str]]]) -> list[Finding]:
    """OL102: one warning per call site the analysis could not follow, naming the stages it limits."""
    findings = []
    for parsed, call, stages in unresolved.values():
        line, col = parsed.position(call)
        assert parsed.module is not None
        code = " ".join(parsed.module.code_for_node(call).split())
        code = code if len(code) <= 80 else code[:77] + "..."
        message = (
            f"`{code}` takes a computed module or attribute name, so the analysis cannot follow it; reachability "
            f"of stage {', '.join(sorted(set(stages)))} is incomplete: a handoff behind this call is not seen, and "
            f"declared edges of the stage are not reported as unneeded. Use a literal name, or keep the declared edges"
        )
        findings.append(Finding(str(parsed.path), line, col, "OL102", message, Severity.WARNING))
    return findings


def _digest(path: Path) -> str | None:
    raw, _ = read_regular(path)
    return None if raw is None else digest_bytes(raw)


def _comments(parsed: ParsedFile) -> list[Any]:
    """Suppression comments of one file, as data (memoised on the parsed file)."""
    cached = getattr(parsed, "_comments", None)
    if cached is None:
        cached = []
        if parsed.source is not None:
            for item in scan_python(str(parsed.path), parsed.source):
                if isinstance(item, Suppression):
                    cached.append(["ignore", item.line, item.col, list(item.codes), item.reason, sorted(item.lines)])
                else:
                    cached.append(["bad", *finding_to_json(item)])
        parsed._comments = cached  # type: ignore[attr-defined]
    return cached


def finding_to_json(finding: Finding) -> list[Any]:
    return [finding.path, finding.line, finding.col, finding.code, finding.message, finding.severity.value]


def finding_from_json(item: list[Any]) -> Finding:
    path, line, col, code, message, severity = item
    return Finding(path, line, col, code, message, Severity(severity))


def _project(tracker: Tracker, projects: dict[Path, tuple[Project, Analyzer]], root: Path) -> tuple[Project, Analyzer]:
    if root not in projects:
        project = Project(root, tracker)
        projects[root] = (project, Analyzer(project))
    return projects[root]


def _check_view(
    tracker: Tracker,
    projects: dict[Path, tuple[Project, Analyzer]],
    folder: ModelFolder,
    view: PipelineView,
    label: str,
    findings: list[Finding],
    handoffs: list[Handoff],
    unresolved: dict[tuple[str, int], tuple[ParsedFile, Any, list[str]]],
) -> None:
    """Attribute state to the stages of one contract (a pipeline file or a config class) and check it."""
    resolved = str(view.path)
    root = _pipeline_root(tracker, folder, [stage.factory for stage in view.stages])
    project, analyzer = _project(tracker, projects, root)
    stages: dict[str, StageAnalysis] = {}
    uses_cache: dict[tuple[Sym, ...], StageReach] = {}
    for stage in view.stages:
        starts: list[Sym] = []
        complete = True
        for what, target in (("factory", stage.factory), ("merge_fn", stage.merge_fn), ("route_fn", stage.route_fn)):
            if not target:
                continue
            if not project.in_tree(target.replace(":", ".")):
                complete = False
                findings.append(Finding(resolved, stage.line, stage.col, "OL101", f"stage {stage.name}: {what} {target!r} is outside the analysed tree ({project.root}); its state accesses are not checked", Severity.INFO))
                continue
            sym, reason = project.resolve_target(target)
            if sym is None:
                complete = False
                if reason.endswith("does not parse"):
                    continue  # OL900 on the module itself says what to fix
                findings.append(Finding(resolved, stage.line, stage.col, "OL003", f"stage {stage.name}: {what} {target!r} does not resolve: {reason}; fix the dotted path ('pkg.module:function')", Severity.ERROR))
                continue
            starts.append(sym)
        key = tuple(starts)
        if key not in uses_cache:
            uses_cache[key] = stage_uses(analyzer, starts)
        reach = uses_cache[key]
        for parsed, call in reach.unresolved:
            unresolved.setdefault((str(parsed.path), id(call)), (parsed, call, []))[2].append(f"{stage.name} in {label}")
        stages[stage.name] = StageAnalysis(stage.name, reach.uses, complete and not project.broken and not reach.unresolved)

    def where(path: str, line: int) -> str:
        return f"{tracker.display(path)}:{line}"

    findings.extend(check_pipeline(view, stages, project.state, where, label, handoffs))


def _pipeline_root(tracker: Tracker, folder: ModelFolder, factories: list[str]) -> Path:
    """The import root, or (for namespace packages without ``__init__.py``) the nearest folder
    above the model folder that holds the factories' top-level package."""
    tops = {factory.replace(":", ".").split(".")[0] for factory in factories}
    candidates = [folder.import_root, *folder.path.parents][:8]
    for candidate in candidates:
        if any(tracker.is_dir(candidate / top) or tracker.is_file(candidate / f"{top}.py") for top in tops):
            return candidate
    return folder.import_root
