"""One lint run: discover model folders, load each pipeline, attribute state to
stages, check the contract, then apply settings and suppressions.

Nothing here imports the code under analysis; pipeline files are read through
omni-config and Python files through libcst only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from .bodies import Analyzer
from .discovery import DiscoveryError, ModelFolder, discover
from .findings import Finding, Severity
from .handoffs import StageAnalysis, check_pipeline
from .pipeline import PipelineLoadFailed, load_pipeline
from .project import Project, Sym
from .reach import StageUse, stage_uses
from .rules import RULES
from .scan import StateKey
from .settings import DEFAULT_EXCLUDES, Settings
from .source import SourceCache
from .suppress import Suppression, scan_python, scan_yaml


@dataclass(frozen=True)
class LintReport:
    findings: tuple[Finding, ...]
    models: int
    pipelines: int
    files: int
    suppressed: int = 0

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity is Severity.ERROR)

    @property
    def infos(self) -> int:
        return sum(1 for f in self.findings if f.severity is Severity.INFO)

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0


@dataclass
class _Run:
    settings: Settings
    cwd: Path
    sources: SourceCache = field(default_factory=SourceCache)
    projects: dict[Path, tuple[Project, Analyzer]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    yaml_files: set[Path] = field(default_factory=set)
    uses_cache: dict[tuple[Path, tuple[Sym, ...]], dict[StateKey, StageUse]] = field(default_factory=dict)

    def project(self, root: Path) -> tuple[Project, Analyzer]:
        if root not in self.projects:
            project = Project(root, self.sources)
            self.projects[root] = (project, Analyzer(project))
        return self.projects[root]

    def display(self, path: str | Path) -> str:
        absolute = Path(path)
        try:
            return absolute.relative_to(self.cwd).as_posix()
        except ValueError:
            return absolute.as_posix()


def lint(paths: list[str | Path], settings: Settings | None = None, cwd: Path | None = None) -> LintReport:
    """Lint the model folders under ``paths``; raises DiscoveryError for a bad path (exit 2)."""
    settings = settings or Settings(base=Path.cwd())
    run = _Run(settings, (cwd or Path.cwd()).resolve())
    folders = discover([Path(p) for p in paths], settings.excluded)
    if not folders:
        shown = ", ".join(str(p) for p in paths)
        raise DiscoveryError(
            f"no model folders found under {shown}\n  fix:  pass a folder that contains model folders "
            f"(a model folder holds pipeline.yaml or pipeline_<variant>.yaml), or check [tool.omni-lint] exclude"
        )
    pipelines = 0
    for folder in folders:
        _parse_folder(run, folder)
        for pipeline_file in folder.pipeline_files:
            pipelines += 1
            _lint_pipeline(run, folder, pipeline_file)
    for parsed in run.sources.files():
        if parsed.error is not None:
            line, col, message = parsed.error
            run.findings.append(Finding(str(parsed.path), line, col, "OL900", f"cannot parse {parsed.path.name}: {message}", Severity.ERROR))
    findings, suppressed = _finalise(run)
    return LintReport(tuple(findings), len(folders), pipelines, len(run.sources.files()), suppressed)


def _parse_folder(run: _Run, folder: ModelFolder) -> None:
    for dirpath, dirnames, filenames in os.walk(folder.path):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in DEFAULT_EXCLUDES and not d.startswith(".") and not run.settings.excluded(here / d))
        for name in sorted(filenames):
            if name.endswith(".py") and not run.settings.excluded(here / name):
                run.sources.get(here / name)


def _lint_pipeline(run: _Run, folder: ModelFolder, pipeline_file: Path) -> None:
    run.yaml_files.add(pipeline_file.resolve())
    try:
        view = load_pipeline(pipeline_file, str(pipeline_file.resolve()))
    except PipelineLoadFailed as failure:
        run.findings.extend(failure.findings)
        return
    root = _pipeline_root(folder, [stage.factory for stage in view.stages])
    project, analyzer = run.project(root)
    label = run.display(pipeline_file)
    stages: dict[str, StageAnalysis] = {}
    for stage in view.stages:
        starts: list[Sym] = []
        complete = True
        for what, target in (("factory", stage.factory), ("merge_fn", stage.merge_fn), ("route_fn", stage.route_fn)):
            if not target:
                continue
            if not project.in_tree(target.replace(":", ".")):
                complete = False
                run.findings.append(Finding(str(pipeline_file.resolve()), stage.line, stage.col, "OL101", f"stage {stage.name}: {what} {target!r} is outside the analysed tree ({project.root}); its state accesses are not checked", Severity.INFO))
                continue
            sym, reason = project.resolve_target(target)
            if sym is None:
                complete = False
                if reason.endswith("does not parse"):
                    continue  # OL900 on the module itself says what to fix
                run.findings.append(Finding(str(pipeline_file.resolve()), stage.line, stage.col, "OL003", f"stage {stage.name}: {what} {target!r} does not resolve: {reason}; fix the dotted path ('pkg.module:function')", Severity.ERROR))
                continue
            starts.append(sym)
        cache_key = (root, tuple(starts))
        if cache_key not in run.uses_cache:
            run.uses_cache[cache_key] = stage_uses(analyzer, starts)
        stages[stage.name] = StageAnalysis(stage.name, run.uses_cache[cache_key], complete and not project.broken)

    def where(path: str, line: int) -> str:
        return f"{run.display(path)}:{line}"

    run.findings.extend(check_pipeline(view, stages, project.state, where, label))


def _pipeline_root(folder: ModelFolder, factories: list[str]) -> Path:
    """The import root, or (for namespace packages without ``__init__.py``) the nearest folder
    above the model folder that holds the factories' top-level package."""
    tops = {factory.replace(":", ".").split(".")[0] for factory in factories}
    candidates = [folder.import_root, *folder.path.parents][:8]
    for candidate in candidates:
        if any((candidate / top).is_dir() or (candidate / f"{top}.py").is_file() for top in tops):
            return candidate
    return folder.import_root


def _finalise(run: _Run) -> tuple[list[Finding], int]:
    settings = run.settings
    suppressions: list[Suppression] = []
    extra: list[Finding] = []
    for parsed in run.sources.files():
        if parsed.source is not None:
            for item in scan_python(str(parsed.path), parsed.source):
                (suppressions if isinstance(item, Suppression) else extra).append(item)  # type: ignore[arg-type]
    for path in sorted(run.yaml_files):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for item in scan_yaml(str(path), text):
            (suppressions if isinstance(item, Suppression) else extra).append(item)  # type: ignore[arg-type]
    by_path: dict[str, list[Suppression]] = {}
    for suppression in suppressions:
        by_path.setdefault(suppression.path, []).append(suppression)
    kept: set[Finding] = set()
    suppressed = 0
    for finding in run.findings:
        if not settings.enabled(finding.code):
            continue
        hit = False
        for suppression in by_path.get(finding.path, ()):
            if suppression.covers(finding):
                suppression.used = True
                hit = True
        if hit:
            suppressed += 1
        else:
            kept.add(finding)
    for finding in extra:
        if settings.enabled(finding.code):
            kept.add(finding)
    for suppression in suppressions:
        if not suppression.used and any(settings.enabled(code) for code in suppression.codes):
            message = f"suppression of {', '.join(suppression.codes)} matched no finding; remove it"
            finding = Finding(suppression.path, suppression.line, suppression.col, "OL801", message, Severity.INFO)
            if settings.enabled("OL801"):
                kept.add(finding)
    shown = {replace(f, path=run.display(f.path), severity=RULES[f.code].severity) for f in kept}
    return sorted(shown), suppressed
