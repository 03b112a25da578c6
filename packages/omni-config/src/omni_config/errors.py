"""Configuration errors that carry everything a user needs to fix them.

A user mistake is never a traceback: every problem becomes a :class:`ConfigIssue`
(the config path, the offending value, the rule it breaks and the fix), and all
independent issues travel together in one :class:`ConfigError` so a user fixes a
file in one pass instead of one error per run.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_MISSING = object()
#: The ``source`` of a value given as a command-line override.
COMMAND_LINE = "command line"


@dataclass(frozen=True)
class ConfigIssue:
    """One independent problem in a configuration."""

    path: str
    rule: str
    fix: str
    value: Any = _MISSING
    source: str | None = None
    """The file the problem is in, or ``"command line"``."""
    line: int | None = None
    """1-based line (and column) of the YAML node the problem is about."""
    column: int | None = None

    @property
    def has_value(self) -> bool:
        return self.value is not _MISSING

    def render(self) -> str:
        head = f"error: {self.path}"
        if self.has_value:
            head += f" = {format_value(self.value)}"
        lines = [head, f"  rule: {self.rule}", f"  fix:  {self.fix}"]
        if self.source:
            lines.append(f"  in:   {self.where}")
        return "\n".join(lines)

    @property
    def where(self) -> str:
        """``file:line:column`` (what editors and CI logs link), or the command-line flag."""
        if self.source == COMMAND_LINE:
            return COMMAND_LINE if self.path.startswith("-") or self.path == COMMAND_LINE else f"{COMMAND_LINE} (--{self.path})"
        if self.line is None:
            return self.source or ""
        return f"{self.source}:{self.line}:{self.column or 1}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "rule": self.rule, "fix": self.fix}
        if self.has_value:
            out["value"] = _jsonable(self.value)
        if self.source:
            out["source"] = self.source
        if self.line is not None:
            out["line"], out["column"] = self.line, self.column
        return out


#: Longest text of one value shown in an error; longer is cut with a marker saying how much was left out.
MAX_SHOWN_CHARS = 200
#: Items of one list or mapping shown in an error; the rest are counted, not shown.
MAX_SHOWN_ITEMS = 10


def format_value(value: Any) -> str:
    """The value as an error shows it, never longer than about :data:`MAX_SHOWN_CHARS` characters.

    A config value can be megabytes (a long string, a list aliased thousands of
    times): printing it whole would flood the terminal or CI log, and building its
    whole ``repr`` first can take gigabytes, so the walk itself is bounded.
    """
    if isinstance(value, str):
        return _cut(repr(value[: MAX_SHOWN_CHARS + 1]), len(value), "characters")
    try:
        text = json.dumps(_jsonable(value))
    except (TypeError, ValueError):
        text = repr(_jsonable(value))
    return _cut(text, None, "")


def _cut(text: str, total: int | None, unit: str) -> str:
    if len(text) <= MAX_SHOWN_CHARS + 2:
        return text
    size = f" of {total} {unit}" if total is not None else ""
    return f"{text[:MAX_SHOWN_CHARS]}... (cut{size})"


def _jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON-ready copy of ``value`` with long strings and collections cut (bounded work on any input)."""
    if isinstance(value, str):
        return value if len(value) <= MAX_SHOWN_CHARS else f"{value[:MAX_SHOWN_CHARS]}... (cut of {len(value)} characters)"
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if depth >= 8:
        return "..."
    if isinstance(value, dict):
        shown = {str(k)[:MAX_SHOWN_CHARS]: _jsonable(v, depth + 1) for k, v in itertools.islice(value.items(), MAX_SHOWN_ITEMS)}
        if len(value) > MAX_SHOWN_ITEMS:
            shown["..."] = f"{len(value) - MAX_SHOWN_ITEMS} more keys"
        return shown
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_jsonable(v, depth + 1) for v in itertools.islice(value, MAX_SHOWN_ITEMS)]
        if len(value) > MAX_SHOWN_ITEMS:
            items.append(f"... {len(value) - MAX_SHOWN_ITEMS} more items")
        return items
    return _cut(repr(value), None, "")


class ConfigError(Exception):
    """A configuration the user must fix; carries every independent issue."""

    exit_code = 1

    def __init__(self, issues: Iterable[ConfigIssue]):
        self.issues: tuple[ConfigIssue, ...] = tuple(_dedupe(issues))
        super().__init__(self.render())

    def render(self) -> str:
        count = len(self.issues)
        header = f"{count} error{'s' if count != 1 else ''} in the configuration:"
        return "\n".join([header, *(issue.render() for issue in self.issues)])

    def to_dict(self) -> dict[str, Any]:
        return {"valid": False, "errors": [issue.to_dict() for issue in self.issues]}


class ConfigFileError(Exception):
    """A file that cannot be read or parsed at all (exit 2, not a config mistake)."""

    exit_code = 2

    def __init__(self, path: str, reason: str, fix: str, line: int | None = None, column: int | None = None):
        self.path = path
        self.reason = reason
        self.fix = fix
        self.line = line
        self.column = column
        super().__init__(f"error: cannot load {path}: {reason}\n  fix:  {fix}")

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"path": self.path, "rule": self.reason, "fix": self.fix}
        if self.line is not None:
            error.update(source=self.path, line=self.line, column=self.column)
        return {"valid": False, "errors": [error]}


def _dedupe(issues: Iterable[ConfigIssue]) -> list[ConfigIssue]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for issue in issues:
        key = (issue.path, issue.rule, issue.fix)
        if key not in seen:
            seen.add(key)
            out.append(issue)
    return out
