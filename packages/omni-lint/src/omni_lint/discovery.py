"""Find model folders and the import root their dotted paths resolve against.

A model folder is a folder holding ``pipeline.yaml`` or ``pipeline_<variant>.yaml``.
Factory paths are dotted import paths, so they resolve against the folder the
top-level package sits in: walking up from the model folder while each folder
is a package (has ``__init__.py``) finds it without importing anything.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .settings import DEFAULT_EXCLUDES
from .source import file_kind, read_regular

PIPELINE_FILE = re.compile(r"^pipeline(_[A-Za-z0-9][A-Za-z0-9_\-]*)?\.yaml$")
#: A class statement with bases: a contract written in Python is one (its base is resolved later,
#: by qualified name, so an alias or a base defined in another module is not missed here).
CONTRACT_CLASS = re.compile(rb"^class\s+\w+\s*\(", re.MULTILINE)
#: Words a module holding a Python contract contains: the base, the stage record, the entry
#: point or the contract method. A cheap byte pre-filter; the unit decides on the parsed code.
CONTRACT_MARKERS = (b"PipelineConfig", b"StageConfig", b"EntryClass", b"process_local_edges")


class DiscoveryError(Exception):
    """A path argument that does not exist (a tool failure, exit 2)."""


@dataclass(frozen=True)
class ModelFolder:
    path: Path
    pipeline_files: tuple[Path, ...]
    import_root: Path
    #: modules of the folder that define a class with a ``...PipelineConfig`` base (a contract in Python)
    contract_modules: tuple[Path, ...] = ()


def import_root(folder: Path) -> Path:
    """The folder that holds the top-level package containing ``folder``."""
    current = folder.resolve()
    while (current / "__init__.py").is_file() and current.parent != current:
        current = current.parent
    return current


def pipeline_files(folder: Path) -> tuple[Path, ...]:
    names = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return ()
    for entry in entries:
        if not PIPELINE_FILE.match(entry.name):
            continue
        try:
            if entry.is_file():
                names.append(entry.name)
        except OSError:
            continue  # a looping link named like a pipeline file: reported by the tree walk
    # pipeline.yaml first, then variants in name order
    names.sort(key=lambda name: (name != "pipeline.yaml", name))
    return tuple(folder / name for name in names)


def broken_link(path: Path) -> str | None:
    """Why a symlink cannot be followed (a loop, a dangling target), else None."""
    if not os.path.islink(path):
        return None
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop: following it never reaches a file or folder"
        return None  # dangling: nothing there to check
    return None


def folder_link_loop(here: Path, link: Path) -> str | None:
    """Why a folder symlink in ``here`` loops (its target is ``here`` or a folder above it), else None.

    The walk never enters linked folders, so such a link cannot hang it; but a tool that does
    follow links (an import, a packager, ``cp -r``) would recurse forever, so it is reported."""
    target = os.path.realpath(link)
    if not os.path.isdir(target):
        return None
    inside = os.path.realpath(here)
    if inside == target or inside.startswith(target.rstrip(os.sep) + os.sep):
        where = "its own folder" if inside == target else f"{target}, a folder that contains the link"
        return f"symlink loop: this folder link points at {where}, so following it recurses forever"
    return None


def _not_regular(path: Path) -> str | None:
    """Why a Python or pipeline file is not read (a FIFO would block, a device never ends), else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else f"not a regular file ({file_kind(mode)}); only regular files are read"


def walk_tree(start: Path, excluded: Callable[[Path], bool], problems: dict[Path, str]) -> Iterator[tuple[Path, list[str]]]:
    """``(folder, file names)`` under ``start`` in sorted order, skipping default-excluded and
    ``exclude``d folders; symlinked folders are not entered (so no cycle), and every symlink
    that loops (a file link chain, or a folder link to its own folder or one above it), and every Python or pipeline file that is not a regular file, is recorded in
    ``problems`` (reported as OL900, never a silent skip). Iterative, one ``scandir`` per folder."""
    pending = [start]
    while pending:
        here = pending.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda entry: entry.name)
        except OSError:
            continue
        folders, names = [], []
        for entry in entries:
            path = here / entry.name
            reason = None
            try:
                link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if link:
                reason = broken_link(path) or folder_link_loop(here, path)
            wanted = entry.name.endswith(".py") or PIPELINE_FILE.match(entry.name)
            if reason is None and wanted and (link or not entry.is_file(follow_symlinks=False)):
                reason = _not_regular(path)
            if reason is not None:
                problems[path] = reason
            elif is_dir:
                if entry.name not in DEFAULT_EXCLUDES and not entry.name.startswith(".") and not excluded(path):
                    folders.append(path)
            elif not (link and os.path.isdir(path)):
                names.append(entry.name)
        yield here, names
        pending.extend(reversed(folders))


def path_state(path: Path | str) -> str:
    """``file``, ``dir`` or ``none``: what an import probe saw at ``path``."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return "none"
    return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "none"


def folder_python_files(folder: Path, excluded: Callable[[Path], bool], problems: dict[Path, str]) -> list[Path]:
    files = []
    for here, names in walk_tree(folder, excluded, problems):
        files.extend(here / name for name in names if name.endswith(".py") and not excluded(here / name))
    return files


def discover(paths: list[Path], excluded: Callable[[Path], bool], problems: dict[Path, str] | None = None) -> list[ModelFolder]:
    """Every model folder under ``paths`` (sorted, each once); looping symlinks go to ``problems``."""
    problems = {} if problems is None else problems
    found: dict[Path, ModelFolder] = {}
    for given in paths:
        reason = broken_link(given)
        if reason is not None:
            raise DiscoveryError(f"{given}: {reason}\n  fix:  point the link at a real folder, or pass the folder itself")
        if not given.exists():
            raise DiscoveryError(f"{given}: no such file or directory\n  fix:  pass a folder that contains model folders (a folder with pipeline.yaml)")
        start = given.resolve()
        if start.is_file():
            folder = start.parent
            if not PIPELINE_FILE.match(start.name):
                folder = _enclosing_model_folder(folder)
                if folder is None:
                    continue
            _add(found, folder)
            continue
        if excluded(start):
            continue
        for here, names in walk_tree(start, excluded, problems):
            if pipeline_files(here) or contract_modules(here, names):
                _add(found, here)
    return [found[key] for key in sorted(found)]


def contract_modules(folder: Path, names: list[str]) -> tuple[Path, ...]:
    """The folder's ``.py`` files that may hold a contract class (a class statement and a contract word)."""
    found = []
    for name in names:
        if name.endswith(".py"):
            raw, _ = read_regular(folder / name)
            if raw is not None and any(marker in raw for marker in CONTRACT_MARKERS) and CONTRACT_CLASS.search(raw):
                found.append(folder / name)
    return tuple(found)


def _add(found: dict[Path, ModelFolder], folder: Path) -> None:
    folder = folder.resolve()
    if folder not in found:
        names = sorted(entry.name for entry in os.scandir(folder))
        found[folder] = ModelFolder(folder, pipeline_files(folder), import_root(folder), contract_modules(folder, names))


def _enclosing_model_folder(folder: Path) -> Path | None:
    for candidate in [folder, *folder.parents]:
        if pipeline_files(candidate) or contract_modules(candidate, sorted(os.listdir(candidate))):
            return candidate
        if not (candidate / "__init__.py").is_file():
            return None
    return None
