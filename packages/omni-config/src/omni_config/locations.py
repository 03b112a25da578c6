"""Where each value of a loaded config came from: a file's line and column, or the command line.

An error is only as useful as the place it points to: CI annotates the line
(``omni-compile --format github``) and an editor jumps to it. The loader
records an :class:`Origin` per dotted path (the same paths issues carry,
``stages.vocoder.process``), the model file first and each deployment file and
override on top; an issue takes the origin of its path, or of the nearest
enclosing node (a missing field points at its mapping). The compiler reads the
same table for its own errors through :func:`origins_of`.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .errors import COMMAND_LINE, ConfigIssue


@dataclass(frozen=True)
class Origin:
    source: str
    line: int | None = None
    column: int | None = None


#: Dotted config path -> where its value was written.
Origins = dict[str, Origin]

_ATTACHED: dict[int, Mapping[str, Origin]] = {}


def file_origins(marks: Mapping[tuple[Any, ...], tuple[int, int]], data: Any, source: str) -> Origins:
    from .validation import dotted_path

    return {dotted_path(loc, data): Origin(source, line, column) for loc, (line, column) in marks.items()}


def lookup(origins: Mapping[str, Origin], path: str) -> Origin | None:
    """The origin of ``path`` or of the nearest node that encloses it."""
    while path:
        found = origins.get(path)
        if found is not None:
            return found
        path = path[: max(path.rfind("."), path.rfind("["), 0)]
    return origins.get("(config)")


def locate(issues: Iterable[ConfigIssue], origins: Mapping[str, Origin], files: Mapping[str, Mapping[str, Origin]] | None = None) -> list[ConfigIssue]:
    """Give each issue without a line the line of its path: in its own file when it names one, else where the value came from."""
    out = []
    for issue in issues:
        if issue.line is None and issue.source != COMMAND_LINE and not issue.path.startswith("-"):  # "--gpus" names a flag
            table = (files or {}).get(issue.source) if issue.source else origins
            found = lookup(table, issue.path) if table else None
            if found is not None:
                issue = replace(issue, source=found.source, line=found.line, column=found.column)
        out.append(issue)
    return out


def attach(config: Any, origins: Mapping[str, Origin]) -> None:
    """Remember where a loaded config's values came from, for as long as the config lives."""
    key = id(config)
    _ATTACHED[key] = origins
    weakref.finalize(config, _ATTACHED.pop, key, None)


def origins_of(config: Any) -> Mapping[str, Origin]:
    """The origins :func:`attach` recorded, or an empty table (a config built in memory)."""
    return _ATTACHED.get(id(config), {})
