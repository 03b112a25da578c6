"""The analysis cache: one JSON file per model folder, reused while its inputs are unchanged.

Like ruff's and mypy's caches it lives in a folder (``.omni_lint_cache`` at
the project root by default, ``--cache-dir`` elsewhere, ``--no-cache`` off).
Two kinds of records, both JSON (never pickle: the cache lives in the project
tree, where anyone can write to it):

* per file, keyed by the BLAKE2b digest of its content (``files.json``): what
  the file says to the linter by itself (its suppression comments);
* per model folder: the unit result of :mod:`omni_lint.unit` with the digest
  of every Python and pipeline file the analysis read and the state of every
  path it probed while resolving imports.

A folder's entry is reused only when the tool, the settings that shape the
analysis and every one of those inputs are the same (each file is hashed once
per run), so an edit anywhere the analysis looked (a shared helper in
``common/``, a new module that would shadow an import) re-analyses the folder.
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
        #: per-file analysis (suppression comments and their problems) by content digest
        self._files: dict[str, Any] | None = None
        self._files_added = False
        #: digests and path states seen during this run (each file is hashed once per run)
        self._digests: dict[str, str | None] = {}
        self._states: dict[str, str] = {}

    def _file_store(self) -> dict[str, Any]:
        if self._files is None:
            raw, _ = read_regular(self.directory / "files.json", _MAX_ENTRY_BYTES)
            try:
                data = json.loads(raw) if raw is not None else {}
                self._files = data["files"] if data.get("key") == self.key else {}
            except (ValueError, KeyError, TypeError, AttributeError):
                self._files = {}
        return self._files

    def digest(self, path: str) -> str | None:
        if path not in self._digests:
            raw, _ = read_regular(Path(path))
            self._digests[path] = None if raw is None else digest_bytes(raw)
        return self._digests[path]

    def state(self, path: str) -> str:
        if path not in self._states:
            self._states[path] = path_state(path)
        return self._states[path]

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
            if not self._unchanged(result, folder, excluded):
                return None
            store = self._file_store()
            result["files"] = {path: {"digest": digest, "comments": store[digest]} for path, digest in result["files"].items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # an entry of another shape, or a file record gone: analyse again, overwrite it
        return result

    def _unchanged(self, result: dict[str, Any], folder: ModelFolder, excluded: Any) -> bool:
        for path, digest in result["yaml"].items():
            if digest is None or self.digest(path) != digest:
                return False
        for path, digest in result["files"].items():
            if not digest or self.digest(path) != digest:
                return False
        for path, state in result["probes"].items():
            if self.state(path) != state:
                return False
        problems: dict[Path, str] = {}
        listing = sorted(str(p) for p in folder_python_files(folder.path, excluded, problems))
        return not problems and listing == result["listing"]

    def store(self, result: dict[str, Any]) -> None:
        """Write the entry atomically; a cache that cannot be written only costs speed."""
        if not result.get("cacheable"):
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._mark_folder()
            store = self._file_store()
            for info in result["files"].values():
                if info["digest"] and info["digest"] not in store:
                    store[info["digest"]] = info["comments"]
                    self._files_added = True
            slim = {**result, "files": {path: info["digest"] for path, info in result["files"].items()}}
            self._write(self._entry(Path(result["folder"])), {"key": self.key, "result": slim})
        except OSError:
            return

    def close(self) -> None:
        """Write the per-file store once, after the run's entries."""
        if self._files_added and self._files is not None:
            try:
                self._write(self.directory / "files.json", {"key": self.key, "files": self._files})
            except OSError:
                return

    def _write(self, target: Path, data: dict[str, Any]) -> None:
        fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data, separators=(",", ":")))
        os.replace(temp, target)

    def _mark_folder(self) -> None:
        """Keep the cache out of git and backups, as ruff and mypy do."""
        ignore = self.directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# created by omni-lint\n*\n", encoding="utf-8")
        tag = self.directory / "CACHEDIR.TAG"
        if not tag.exists():
            tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n# created by omni-lint\n", encoding="utf-8")
