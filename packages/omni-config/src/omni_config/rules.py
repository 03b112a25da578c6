"""The field rules of the schema, as plain functions.

Plain functions (no pydantic import) so the schema reads as field declarations
and each rule can be tested, and reused by other tools, on its own.
"""

from __future__ import annotations

import math
import re
from typing import Any

from . import names

#: ``@r<digits>`` names replica instances; users may not put it in their own names.
RESERVED_REPLICA_SUFFIX = re.compile(r"@r\d+")
# Patterns are applied with fullmatch: '$' would let a trailing newline through.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_IDENTS = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
#: ``pkg.mod:fn`` (attribute after the colon) or ``pkg.mod.fn`` (at least a module and a name).
_DOTTED = re.compile(rf"{_IDENTS}:{_IDENTS}|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
#: Nesting allowed inside ``factory_args`` values.
MAX_VALUE_DEPTH = 32


def check_name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    if RESERVED_REPLICA_SUFFIX.search(value):
        raise ValueError(f"'@r<digits>' is reserved for replica instances and cannot appear in a {what}")
    if not _NAME.fullmatch(value):
        raise ValueError(f"a {what} may contain only letters, digits, '_', '.' and '-'")
    return value


def stage_name(value: Any) -> str:
    return check_name(value, "stage name")


def process_name(value: Any) -> str:
    """A ``processes`` key or a stage's ``process``: checked per value so an error names its path."""
    return check_name(value, "process name")


def dotted_path(value: Any) -> Any:
    if not isinstance(value, str) or not _DOTTED.fullmatch(value):
        raise ValueError("must be an import path with a module and a name, 'pkg.module:function' or 'pkg.module.function' (letters, digits, '_' only)")
    return value


def env_name(value: Any) -> str:
    """What ``os.environ`` accepts as a name: the stage's process sets it before building the stage."""
    problem = names.env_name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def env_value(value: Any) -> str:
    problem = names.env_value_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def json_value(value: Any) -> Any:
    """``factory_args`` travel to the stage's process as JSON: plain JSON values only, nesting bounded."""
    stack = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        at = f" (at {where.lstrip('.')})" if where else ""
        if depth > MAX_VALUE_DEPTH:
            raise ValueError(f"nested deeper than {MAX_VALUE_DEPTH} levels{at}")
        if isinstance(item, dict):
            for key, sub in item.items():
                if not isinstance(key, str):
                    raise ValueError(f"mapping keys must be text, got {type(key).__name__} {key!r}{at}")
                stack.append((sub, f"{where}.{key}", depth + 1))
        elif isinstance(item, list):
            stack.extend((sub, f"{where}[{i}]", depth + 1) for i, sub in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{item} is not a JSON number{at}")
        elif not (item is None or isinstance(item, (str, int, float, bool))):
            raise ValueError(f"a {type(item).__name__} is not a JSON value{at}; use text, numbers, booleans, null, lists and mappings")
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


#: Resources Ray asks for by their own keyword (``num_cpus``) or that omni derives (GPUs from the stages).
RAY_RESERVED_RESOURCES = {
    "CPU": "use processes.<process>.ray.num_cpus",
    "GPU": "GPUs come from the stages' gpu / tp_size and memory fractions; remove it here",
    "memory": "remove it; omni does not reserve heap memory",
    "object_store_memory": "remove it; omni sends no payload through Ray's object store",
}
_RAY_RESOURCE = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]{0,127}")
_RAY_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def ray_resource_name(value: Any) -> str:
    """A custom Ray resource (``node_b``); the built-in ones have their own fields."""
    if value in RAY_RESERVED_RESOURCES:
        raise ValueError(f"'{value}' is a built-in Ray resource, not a custom one: {RAY_RESERVED_RESOURCES[value]}")
    if not isinstance(value, str) or not _RAY_RESOURCE.fullmatch(value):
        raise ValueError("a Ray resource name starts with a letter or '_' and holds letters, digits, '_', '.', ':' or '-' (at most 128)")
    return value


def ray_resource_amount(value: Any) -> Any:
    """Ray accepts a fraction of one unit or whole units, never 1.5."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1 and value != int(value):
        raise ValueError(f"Ray resource amounts above 1 must be whole numbers, got {value}")
    return value


def ray_label_key(value: Any) -> str:
    """A node label key as Ray (and Kubernetes) write them: ``[prefix/]name``."""
    if not isinstance(value, str) or not _RAY_LABEL_KEY.fullmatch(value):
        raise ValueError("a Ray label key is [dns-prefix/]name, the name 1-63 letters, digits, '-', '_' or '.' (e.g. ray.io/accelerator-type)")
    return value


_NUMERIC_KNOBS = ("int", "float")


def knob_declaration_problem(kind: str, low: float | None, high: float | None, choices: list[str] | None) -> str | None:
    """Why a knob's declaration cannot be checked against, or None when it is consistent."""
    if (low is not None or high is not None) and kind not in _NUMERIC_KNOBS:
        return f"min and max apply to int and float knobs, not to a {kind} knob"
    if choices is not None and kind != "str":
        return f"choices apply to str knobs, not to a {kind} knob"
    if low is not None and high is not None and low > high:
        return f"min ({low:g}) is above max ({high:g})"
    return None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def describe_knob(kind: str, low: float | None, high: float | None, choices: list[str] | None, nullable: bool) -> str:
    """The rule a knob's value follows, in words: 'an integer between 1 and 4096, or null'."""
    noun = {"int": "an integer", "float": "a number", "str": "text", "bool": "true or false"}[kind]
    if choices:
        text = "one of " + ", ".join(repr(c) for c in choices)
    elif low is not None and high is not None:
        text = f"{noun} between {_number(low)} and {_number(high)}"
    elif low is not None:
        text = f"{noun} >= {_number(low)}"
    elif high is not None:
        text = f"{noun} <= {_number(high)}"
    else:
        text = noun
    return f"{text}, or null" if nullable else text


def knob_value_breaks(value: Any, kind: str, low: float | None, high: float | None, choices: list[str] | None, nullable: bool) -> bool:
    """True when ``value`` breaks the knob's declaration (type, range, choices, null)."""
    if value is None:
        return not nullable
    if kind == "bool":
        return not isinstance(value, bool)
    if kind == "str":
        return not isinstance(value, str) or (choices is not None and value not in choices)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True
    if kind == "int" and not isinstance(value, int):
        return True
    if isinstance(value, float) and not math.isfinite(value):
        return True
    return (low is not None and value < low) or (high is not None and value > high)
