"""The field rules of the schema, as plain functions.

Plain functions (no pydantic import) so the schema reads as field declarations
and each rule can be tested, and reused by other tools, on its own.
"""

from __future__ import annotations

import re
from typing import Any

#: ``@r<digits>`` names replica instances; users may not put it in their own names.
RESERVED_REPLICA_SUFFIX = re.compile(r"@r\d+")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_.]*)?$")


def check_name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    if RESERVED_REPLICA_SUFFIX.search(value):
        raise ValueError(f"'@r<digits>' is reserved for replica instances and cannot appear in a {what}")
    if not _NAME.match(value):
        raise ValueError(f"a {what} may contain only letters, digits, '_', '.' and '-'")
    return value


def stage_name(value: Any) -> str:
    return check_name(value, "stage name")


def process_name(value: Any) -> str:
    """A ``processes`` key or a stage's ``process``: checked per value so an error names its path."""
    return check_name(value, "process name")


def dotted_path(value: Any) -> Any:
    if not _DOTTED.match(value):
        raise ValueError("must be a dotted import path such as 'pkg.module:function' or 'pkg.module.function'")
    return value


def name_list(value: Any) -> Any:
    """Accept ``next: vocoder`` as shorthand for ``next: [vocoder]``."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return value


def gpu_spec(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("a GPU id must be an integer >= 0 or a list of them (one per TP rank)")  # noqa: TRY004 - pydantic reports ValueError only
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a GPU id must be an integer >= 0")
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if any(v < 0 for v in value):
            raise ValueError("a GPU id must be an integer >= 0")
        return list(value)
    raise ValueError("a GPU id must be an integer >= 0 or a non-empty list of them (one per TP rank)")


def replica_devices(value: Any) -> Any:
    """``replica_devices: 1`` is shorthand for ``[1]``; negative ids are refused before typing."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list) and any(isinstance(v, int) and not isinstance(v, bool) and v < 0 for v in value):
        raise ValueError("GPU ids must be integers >= 0")
    return value
