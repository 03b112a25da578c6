"""Dotted overrides: ``--stages.vocoder.process vocoder`` and friends.

Deployment files are flattened into the same ``(path, value)`` form, so one
mechanism checks tiers, stage names and field names for both sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import COMMAND_LINE, ConfigIssue
from .locations import Origin
from .tiers import ValueKind
from .yamlread import read_value

MAX_OVERRIDE_VALUE_CHARS = 4096


@dataclass(frozen=True)
class Override:
    path: tuple[str, ...]
    value: Any
    raw: str | None
    """The CLI text; None when the value came from a YAML file already typed."""
    source: str
    origin: Origin | None = None
    """Where the setting was written (file, line, column), for errors about the value it sets."""

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


def split_overrides(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Separate dotted overrides (``--a.b v`` / ``--a.b=v``) from other arguments.

    Only flags whose name contains a dot are overrides, so ordinary options like
    ``--format json`` pass through untouched.
    """
    rest: list[str] = []
    overrides: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token.startswith("--") and "." in token.split("=", 1)[0]:
            overrides.append(token)
            if "=" not in token and i + 1 < len(argv) and not _is_flag(argv[i + 1]):
                overrides.append(argv[i + 1])
                i += 1
        else:
            rest.append(token)
        i += 1
    return rest, overrides


def parse_overrides(tokens: Sequence[str]) -> tuple[list[tuple[tuple[str, ...], str]], list[ConfigIssue]]:
    """Parse CLI tokens into ``(path, raw string)`` pairs; typing happens against the schema later."""
    pairs: list[tuple[tuple[str, ...], str]] = []
    issues: list[ConfigIssue] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--"):
            issues.append(ConfigIssue("command line", f"unexpected argument {token!r}: overrides look like --stages.NAME.FIELD VALUE", "remove it or put it after an override flag", value=token, source=COMMAND_LINE))
            i += 1
            continue
        body = token[2:]
        if "=" in body:
            name, raw = body.split("=", 1)
        elif i + 1 < len(tokens) and not _is_flag(tokens[i + 1]):
            name, raw = body, tokens[i + 1]
            i += 1
        else:
            issues.append(ConfigIssue(body or token, "an override needs a value", f"write --{body} VALUE or --{body}=VALUE", source=COMMAND_LINE))
            i += 1
            continue
        i += 1
        parts = tuple(name.split("."))
        if len(parts) < 2 or any(not p for p in parts):
            issues.append(ConfigIssue(name or token, "an override path has the form a.b[.c...] with no empty parts", "write it like --stages.vocoder.process vocoder", value=token, source=COMMAND_LINE))
            continue
        if len(raw) > MAX_OVERRIDE_VALUE_CHARS:
            issues.append(ConfigIssue(name, f"override values are limited to {MAX_OVERRIDE_VALUE_CHARS} characters", "shorten the value or put it in a deployment file", value=raw[:40] + "...", source=COMMAND_LINE))
            continue
        pairs.append((parts, raw))
    return pairs, issues


def _is_flag(token: str) -> bool:
    """``--x`` is the next flag, not a value; ``--`` alone and negative numbers are values."""
    return token.startswith("--") and len(token) > 2 and not _is_number(token)


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


class ValueParseError(ValueError):
    pass


def parse_value(raw: str, kind: ValueKind) -> Any:
    """Type a CLI string by the field it sets."""
    if kind is ValueKind.TEXT:
        return raw
    if kind in (ValueKind.IDS, ValueKind.ID_LIST):
        text = raw.strip()
        if text.startswith("["):
            value = _yaml(text)
        elif "," in text:
            value = [_yaml(part.strip()) for part in text.split(",")]
        else:
            value = _yaml(text)
            if kind is ValueKind.ID_LIST and not isinstance(value, list):
                value = [value]
        return value
    return _yaml(raw)


def _yaml(text: str) -> Any:
    """A YAML scalar or flow value, under the file rules (no dates, tags, aliases bombs, deep nesting)."""
    if not text.strip():
        return ""
    try:
        return read_value(text)
    except ValueError as exc:
        raise ValueParseError(f"not a valid value: {exc}") from None
