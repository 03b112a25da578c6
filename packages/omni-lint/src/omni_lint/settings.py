"""``[tool.omni-lint]`` in pyproject.toml: which paths, which codes, what to skip.

The closest pyproject.toml above the working directory that has a
``[tool.omni-lint]`` table wins, so a monorepo sets the policy once at its root.
A misspelt key is a tool failure (exit 2) with a did-you-mean, never silently
ignored.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from .rules import RULES

#: Folders never searched for model folders (virtual envs, VCS and build output).
DEFAULT_EXCLUDES = (".git", ".hg", ".venv", "venv", ".nox", ".tox", "node_modules", "__pycache__", "build", "dist", "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache")

_KEYS = ("paths", "exclude", "select", "ignore", "strict")


class SettingsError(Exception):
    """Invalid settings: a tool failure (exit 2), reported with the file and the fix."""


@dataclass(frozen=True)
class Settings:
    paths: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    #: Directory that relative ``paths`` and ``exclude`` patterns are relative to.
    base: Path = Path(".")
    source: Path | None = None
    #: Warnings fail the run: an incomplete reach (a call the analysis cannot follow) is an
    #: error, not advice, so a pre-commit hook never passes code it could not fully read.
    strict: bool = False

    def enabled(self, code: str) -> bool:
        if self.select and not any(code.startswith(p) for p in self.select):
            return False
        return not any(code.startswith(p) for p in self.ignore)

    def excluded(self, path: Path) -> bool:
        """True for a path under a default-excluded folder or matching an ``exclude`` glob."""
        if not self.exclude:
            return False  # nothing to match: skip resolving the path (called once per file)
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop: judge the path as written
            resolved = Path(os.path.abspath(path))
        try:
            rel = resolved.relative_to(self.base.resolve()).as_posix()
        except ValueError:
            rel = None
        if rel is not None and rel != ".":
            parts = rel.split("/")
            for i in range(1, len(parts) + 1):
                prefix = "/".join(parts[:i])
                if any(fnmatch.fnmatchcase(prefix, pattern.rstrip("/")) for pattern in self.exclude):
                    return True
        return False

    def with_codes(self, select: tuple[str, ...] | None, ignore: tuple[str, ...] | None, strict: bool = False) -> Settings:
        _check_codes(select or (), "--select", None)
        _check_codes(ignore or (), "--ignore", None)
        return Settings(
            paths=self.paths,
            exclude=self.exclude,
            select=self.select if select is None else select,
            ignore=self.ignore + (ignore or ()),
            base=self.base,
            source=self.source,
            strict=self.strict or strict,
        )


def find_pyproject(start: Path) -> Path | None:
    """The closest pyproject.toml at or above ``start`` with a ``[tool.omni-lint]`` table."""
    for folder in [start.resolve(), *start.resolve().parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                data = _read(candidate)
            except SettingsError:
                raise
            if "omni-lint" in data.get("tool", {}):
                return candidate
    return None


def load_settings(pyproject: Path | None) -> Settings:
    if pyproject is None:
        return Settings(base=Path.cwd())
    data = _read(pyproject).get("tool", {}).get("omni-lint", {})
    where = f"{pyproject} [tool.omni-lint]"
    if not isinstance(data, dict):
        raise SettingsError(f"{where}: must be a table\n  fix:  write [tool.omni-lint] with keys {', '.join(_KEYS)}")
    for key in data:
        if key not in _KEYS:
            match = difflib.get_close_matches(key, _KEYS, n=1)
            hint = f"did you mean {match[0]!r}?" if match else f"valid keys: {', '.join(_KEYS)}"
            raise SettingsError(f"{where}: unknown key {key!r}\n  fix:  {hint}")
    values: dict[str, Any] = {key: _string_list(data, key, where) for key in _KEYS if key in data and key != "strict"}
    _check_codes(values.get("select", ()), "select", where)
    _check_codes(values.get("ignore", ()), "ignore", where)
    if "strict" in data:
        if not isinstance(data["strict"], bool):
            raise SettingsError(f"{where}: strict = {data['strict']!r} must be true or false\n  fix:  strict = true")
        values["strict"] = data["strict"]
    return Settings(base=pyproject.parent.resolve(), source=pyproject, **values)


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read: {exc.strerror}\n  fix:  check the file's permissions") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: invalid TOML: {exc}\n  fix:  correct the TOML syntax") from None


def _string_list(data: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data[key]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise SettingsError(f"{where}: {key} = {value!r} must be a list of non-empty strings\n  fix:  {key} = [\"...\"]")
    return tuple(value)


def _check_codes(codes: tuple[str, ...], key: str, where: str | None) -> None:
    for code in codes:
        if not any(known.startswith(code) for known in RULES):
            match = difflib.get_close_matches(code, list(RULES), n=1)
            hint = f"did you mean {match[0]!r}?" if match else f"known codes: {', '.join(RULES)}"
            prefix = f"{where}: " if where else ""
            raise SettingsError(f"{prefix}{key}: unknown rule code {code!r}\n  fix:  {hint} (omni-lint --explain CODE describes each)")
