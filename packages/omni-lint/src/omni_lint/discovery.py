"""Find model folders and the import root their dotted paths resolve against.

A model folder is a folder holding ``pipeline.yaml`` or ``pipeline_<variant>.yaml``.
Factory paths are dotted import paths, so they resolve against the folder the
top-level package sits in: walking up from the model folder while each folder
is a package (has ``__init__.py``) finds it without importing anything.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .settings import DEFAULT_EXCLUDES

PIPELINE_FILE = re.compile(r"^pipeline(_[A-Za-z0-9][A-Za-z0-9_\-]*)?\.yaml$")


class DiscoveryError(Exception):
    """A path argument that does not exist (a tool failure, exit 2)."""


@dataclass(frozen=True)
class ModelFolder:
    path: Path
    pipeline_files: tuple[Path, ...]
    import_root: Path


def import_root(folder: Path) -> Path:
    """The folder that holds the top-level package containing ``folder``."""
    current = folder.resolve()
    while (current / "__init__.py").is_file() and current.parent != current:
        current = current.parent
    return current


def pipeline_files(folder: Path) -> tuple[Path, ...]:
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.is_file() and PIPELINE_FILE.match(entry.name))
    except OSError:
        return ()
    # pipeline.yaml first, then variants in name order
    names.sort(key=lambda name: (name != "pipeline.yaml", name))
    return tuple(folder / name for name in names)


def discover(paths: list[Path], excluded: Callable[[Path], bool]) -> list[ModelFolder]:
    """Every model folder under ``paths`` (sorted, each once)."""
    found: dict[Path, ModelFolder] = {}
    for given in paths:
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
        for dirpath, dirnames, _filenames in os.walk(start):
            here = Path(dirpath)
            dirnames[:] = sorted(
                name for name in dirnames if name not in DEFAULT_EXCLUDES and not name.startswith(".") and not excluded(here / name)
            )
            if pipeline_files(here):
                _add(found, here)
    return [found[key] for key in sorted(found)]


def _add(found: dict[Path, ModelFolder], folder: Path) -> None:
    folder = folder.resolve()
    if folder not in found:
        found[folder] = ModelFolder(folder, pipeline_files(folder), import_root(folder))


def _enclosing_model_folder(folder: Path) -> Path | None:
    for candidate in [folder, *folder.parents]:
        if pipeline_files(candidate):
            return candidate
        if not (candidate / "__init__.py").is_file():
            return None
    return None
