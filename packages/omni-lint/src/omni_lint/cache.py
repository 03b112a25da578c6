"""The analysis cache: one JSON file per model folder, reused while its inputs are unchanged.

Like ruff's and mypy's caches it lives in a folder (``.omni_lint_cache`` at
the project root by default, ``--cache-dir`` elsewhere, ``--no-cache`` off).
A folder's entry holds the unit result of :mod:`omni_lint.unit` with the
content digest (BLAKE2b) of every Python and pipeline file the analysis read
and the state of every path it probed while resolving imports. It is reused
only when the tool, the settings that shape the analysis and every one of
those inputs are the same, so an edit anywhere the analysis looked (a shared
helper in ``common/``, a new module that would shadow an import) re-analyses
the folder. The format is JSON, never pickle: the cache lives in the project
tree, where anyone can write to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from .discovery import ModelFolder, folder_python_files, path_state
from .source import digest_bytes, read_regular

FORMAT = 1
DEFAULT_DIR = ".omni_lint_cache"
_MAX_ENTRY_BYTES = 64 * 1024 * 1024


def tool_fingerprint() -> str:
    """omni-lint's and omni-config's versions, plus the size and mtime of omni-lint's own modules
    (an edited checkout must not reuse results of the code it replaced)."""
    parts = []
    for dist in ("omni-lint", "omni-config"):
        try:
            parts.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist}=?")
    here = Path(__file__).parent
    for path in sorted(here.glob("*.py")):
        info = path.stat()
        parts.append(f"{path.name}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()


class LintCache:
    def __init__(self, directory: Path, key: dict[str, Any]):
        self.directory = directory
        self.key = {"format": FORMAT, "tool": tool_fingerprint(), **key}

    def _entry(self, folder: Path) -> Path:
        name = hashlib.blake2b(str(folder).encode(), digest_size=16).hexdigest()
        return self.directory / f"{name}.json"

    def lookup(self, folder: ModelFolder, excluded: Any) -> dict[str, Any] | None:
        """The stored result for ``folder`` when every input it depends on is unchanged, else None."""
        raw, _ = read_regular(self._entry(folder.path), _MAX_ENTRY_BYTES)
        if raw is None:
            return None
        try:
            entry = json.loads(raw)
            if entry.get("key") != self.key:
                return None
            result = entry["result"]
            if result["yaml"] != {str(p.resolve()): result["yaml"].get(str(p.resolve())) for p in folder.pipeline_files}:
                return None
            if not _unchanged(result, folder, excluded):
                return None
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # an entry of another shape: analyse again, overwrite it
        return result

    def store(self, result: dict[str, Any]) -> None:
        """Write the entry atomically; a cache that cannot be written only costs speed."""
        if not result.get("cacheable"):
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._mark_folder()
            text = json.dumps({"key": self.key, "result": result}, separators=(",", ":"))
            fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(temp, self._entry(Path(result["folder"])))
        except OSError:
            return

    def _mark_folder(self) -> None:
        """Keep the cache out of git and backups, as ruff and mypy do."""
        ignore = self.directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# created by omni-lint\n*\n", encoding="utf-8")
        tag = self.directory / "CACHEDIR.TAG"
        if not tag.exists():
            tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n# created by omni-lint\n", encoding="utf-8")


def _unchanged(result: dict[str, Any], folder: ModelFolder, excluded: Any) -> bool:
    for path, digest in result["yaml"].items():
        if not _same_digest(path, digest):
            return False
    for path, info in result["files"].items():
        if not info["digest"] or not _same_digest(path, info["digest"]):
            return False
    for path, state in result["probes"].items():
        if path_state(Path(path)) != state:
            return False
    problems: dict[Path, str] = {}
    listing = sorted(str(p) for p in folder_python_files(folder.path, excluded, problems))
    return not problems and listing == result["listing"]


def _same_digest(path: str, digest: str | None) -> bool:
    raw, _ = read_regular(Path(path))
    return raw is not None and digest_bytes(raw) == digest
