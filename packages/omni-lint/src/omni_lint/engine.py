"""One lint run: discover model folders, analyse each (cached, in parallel), then apply
settings and suppressions.

Each model folder is one unit of work (:mod:`omni_lint.unit`): its result is
plain data, so it can come from the cache (:mod:`omni_lint.cache`), from this
process, or from a worker process on another core. Nothing here imports the
code under analysis; pipeline files are read through omni-config and Python
files through libcst only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from .deep import run_deep
from .discovery import DiscoveryError, ModelFolder, discover
from .findings import Finding, Severity
from .rules import RULES
from .settings import Settings
from .suppress import Suppression, scan_yaml

#: Below this many Python files to analyse, worker processes cost more than they save: each
#: worker forks, parses the shared modules (common/) again and sends its result back as JSON.
#: Measured on the 66-file omni-models tree (2 cores): 2 workers took 1.8 CPU s against 1.0 in
#: process, and no less wall time; on 1,000 files the workers win.
PARALLEL_MIN_FILES = 200


@dataclass(frozen=True)
class LintReport:
    findings: tuple[Finding, ...]
    models: int
    pipelines: int
    files: int
    suppressed: int = 0
    #: model folders whose analysis came from the cache
    cached: int = 0

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity is Severity.ERROR)

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.severity is Severity.WARNING)

    @property
    def infos(self) -> int:
        return sum(1 for f in self.findings if f.severity is Severity.INFO)

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0


def lint(
    paths: list[str | Path],
    settings: Settings | None = None,
    cwd: Path | None = None,
    *,
    cache_dir: Path | None = None,
    jobs: int | None = None,
) -> LintReport:
    """Lint the model folders under ``paths``; raises DiscoveryError for a bad path (exit 2).

    ``cache_dir``: reuse and store per-folder results there (None: no cache). ``jobs``: worker
    processes (default: the cores this process may use; 1 analyses in this process)."""
    settings = settings or Settings(base=Path.cwd())
    cwd = (cwd or Path.cwd()).resolve()
    problems: dict[Path, str] = {}
    folders = discover([Path(p) for p in paths], settings.excluded, problems)
    if not folders:
        shown = ", ".join(str(p) for p in paths)
        raise DiscoveryError(
            f"no model folders found under {shown}\n  fix:  pass a folder that contains model folders "
            f"(a model folder holds pipeline.yaml or pipeline_<variant>.yaml), or check [tool.omni-lint] exclude"
        )
    cache = None
    if cache_dir is not None:
        from .cache import LintCache

        cache = LintCache(cache_dir, {"cwd": str(cwd), "base": str(settings.base.resolve()), "exclude": list(settings.exclude)})
    results: list[dict[str, Any]] = []
    todo: list[ModelFolder] = []
    for folder in folders:
        hit = cache.lookup(folder, settings.excluded) if cache is not None else None
        if hit is not None:
            results.append(hit)
        else:
            todo.append(folder)
    cached = len(results)
    for result in _analyse(todo, settings, cwd, jobs):
        results.append(result)
        if cache is not None:
            cache.store(result)
    if cache is not None:
        cache.close()
    for path, reason in problems.items():
        results.append({"findings": [[str(path), 1, 1, "OL900", f"cannot read {path.name}: {reason}", "error"]], "files": {}, "yaml": {}, "pipelines": 0})
    return _merge(results, settings, cwd, len(folders), cached)


def _analyse(folders: list[ModelFolder], settings: Settings, cwd: Path, jobs: int | None) -> Iterator[dict[str, Any]]:
    if not folders:
        return
    jobs = jobs if jobs is not None else _cores()
    sizes = {folder: _python_files(folder.path) for folder in folders}
    if jobs <= 1 or len(folders) < 2 or sum(sizes.values()) < PARALLEL_MIN_FILES:
        yield from run_deep(_analyse_here, folders, settings, cwd)
        return
    ordered = sorted(folders, key=lambda folder: -sizes[folder])  # biggest first: the pool ends together
    _preload()  # imported once here, shared by every forked worker (not imported again in each)
    with ProcessPoolExecutor(max_workers=min(jobs, len(folders)), mp_context=get_context("fork")) as pool:
        token = os.urandom(8).hex()
        count = len(ordered)
        for text in pool.map(_analyse_in_worker, ordered, [settings] * count, [cwd] * count, [token] * count):
            yield json.loads(text)


def _analyse_here(folders: list[ModelFolder], settings: Settings, cwd: Path, state: Any = None) -> list[dict[str, Any]]:
    from .unit import analyse_folder, new_run_state

    state = state if state is not None else new_run_state(cwd)  # one parse and analysis per file and run
    return [analyse_folder(folder, settings.excluded, state) for folder in folders]


#: A worker's shared state, kept across the folders of one run: (run token, RunState)
_WORKER_STATE: list[Any] = [None, None]


def _analyse_in_worker(folder: ModelFolder, settings: Settings, cwd: Path, token: str) -> str:
    """Runs in a worker process; the result crosses back as JSON text."""
    if _WORKER_STATE[0] != token:
        from .unit import new_run_state

        _WORKER_STATE[:] = [token, new_run_state(cwd)]
    (result,) = run_deep(_analyse_here, [folder], settings, cwd, _WORKER_STATE[1])
    return json.dumps(result)


def _preload() -> None:
    import importlib

    from . import unit  # noqa: F401  (libcst and the analysis)

    for name in ("omni_config", "omni_config.loader", "omni_config.schema"):
        try:
            importlib.import_module(name)
        except ImportError:
            continue


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _python_files(folder: Path) -> int:
    return sum(1 for _dirpath, _dirs, names in os.walk(folder) for name in names if name.endswith(".py"))


def _display(path: str, cwd: Path) -> str:
    try:
        return Path(path).relative_to(cwd).as_posix()
    except ValueError:
        return Path(path).as_posix()


def _severity(code: str, settings: Settings) -> Severity:
    """The rule's severity; under ``strict`` a warning (an incomplete reach) is an error."""
    severity = RULES[code].severity
    return Severity.ERROR if settings.strict and severity is Severity.WARNING else severity


def _merge(results: list[dict[str, Any]], settings: Settings, cwd: Path, models: int, cached: int) -> LintReport:
    """Apply suppressions and settings to every unit's raw findings (as one run)."""
    from .unit import finding_from_json

    raw: set[Finding] = set()
    comments: dict[str, list[Any]] = {}
    yaml_files: set[str] = set()
    pipelines = 0
    for result in results:
        raw.update(finding_from_json(item) for item in result["findings"])
        for path, info in result["files"].items():
            comments.setdefault(path, info["comments"])
        yaml_files.update(result["yaml"])
        pipelines += result["pipelines"]
    suppressions: list[Suppression] = []
    extra: list[Finding] = []
    for path, items in comments.items():
        for item in items:
            if item[0] == "ignore":
                _tag, line, col, codes, reason, lines = item
                suppressions.append(Suppression(path, line, col, tuple(codes), reason, frozenset(lines)))
            else:
                extra.append(finding_from_json(item[1:]))
    for path in sorted(yaml_files):
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for found in scan_yaml(path, text):
            (suppressions if isinstance(found, Suppression) else extra).append(found)  # type: ignore[arg-type]
    by_path: dict[str, list[Suppression]] = {}
    for suppression in suppressions:
        by_path.setdefault(suppression.path, []).append(suppression)
    kept: set[Finding] = set()
    suppressed = 0
    for finding in raw:
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
    kept.update(finding for finding in extra if settings.enabled(finding.code))
    for suppression in suppressions:
        if not suppression.used and any(settings.enabled(code) for code in suppression.codes) and settings.enabled("OL801"):
            message = f"suppression of {', '.join(suppression.codes)} matched no finding; remove it"
            kept.add(Finding(suppression.path, suppression.line, suppression.col, "OL801", message, Severity.INFO))
    shown = {replace(f, path=_display(f.path, cwd), severity=_severity(f.code, settings)) for f in kept}
    return LintReport(tuple(sorted(shown)), models, pipelines, len(comments), suppressed, cached)
