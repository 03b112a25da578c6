"""Turn pydantic's errors into :class:`ConfigIssue` values users can act on.

Paths use stage names instead of list indices (``stages.vocoder.process``), and
an unknown key gets a did-you-mean from the fields valid at that spot.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import ValidationError

from .errors import ConfigIssue
from .suggest import did_you_mean

#: Nested models by field, by model name.
_CHILDREN: dict[str, dict[str, str]] = {
    "PipelineConfig": {"stages": "StageConfig", "processes": "ProcessConfig", "placement": "PlacementConfig", "process_local_edges": "ProcessLocalEdge"},
    "StageConfig": {"runtime": "StageRuntimeConfig", "knobs": "KnobConfig"},
    "StageRuntimeConfig": {"resources": "ResourcesConfig"},
    "ProcessConfig": {"ray": "RayPlacementConfig", "restart": "RestartPolicyConfig"},
}
_KEYED = {("stages",), ("process_local_edges",), ("processes",)}


def issues_from_validation_error(error: ValidationError, raw: Any) -> list[ConfigIssue]:
    issues = []
    for item in error.errors(include_url=False):
        loc = tuple(item["loc"])
        if len(loc) > 1 and loc[-1] == "[key]" and item["type"] != "extra_forbidden":  # a dict key itself failed (processes.<key>)
            loc = loc[:-1]
        path = dotted_path(loc, raw)
        kind = item["type"]
        value = item.get("input")
        if kind == "extra_forbidden":
            model = _model_at(loc[:-1])
            valid = _fields_of(model) if model else []
            issues.append(ConfigIssue(path, "unknown key", did_you_mean(str(loc[-1]), valid, "keys here"), value=value))
        elif kind == "missing":
            issues.append(ConfigIssue(path, "required field is missing", f"add {loc[-1]}: <value>"))
        else:
            message = item["msg"]
            message = message.removeprefix("Value error, ")
            issues.append(ConfigIssue(path, message, _fix_for(kind, loc), value=value))
    return issues


#: What to write instead, by the field a rule guards (the rule text says what is wrong).
_FIXES = {
    "env": "name the variable with letters, digits and '_' (no '=', no NUL), and give it a value without NUL",
    "factory": "write the import path as 'pkg.module:function' or 'pkg.module.function'",
    "merge_fn": "write the import path as 'pkg.module:function' or 'pkg.module.function'",
    "route_fn": "write the import path as 'pkg.module:function' or 'pkg.module.function'",
    "factory_args": "use plain JSON values: text, numbers, booleans, null, lists and mappings with text keys",
    "enabled": "drop enabled from this stage (it always runs); enabled switches on a stage the model declares optional, such as the aligner",
    "name": "use letters, digits, '_', '.' and '-' only",
    "process": "use letters, digits, '_', '.' and '-' only",
}


def _fix_for(kind: str, loc: tuple[Any, ...]) -> str:
    field = str(loc[-1]) if loc and str(loc[-1]) else "the value"
    if kind.startswith(("greater_than", "less_than")):
        return f"set {field} within the allowed range"
    if "type" in kind or kind.endswith(("_parsing", "_type")):
        return f"give {field} a value of the expected type"
    guarded = next((str(part) for part in reversed(loc) if str(part) in _FIXES), None)
    if kind == "value_error" and guarded is not None:
        return _FIXES[guarded]
    return f"correct {field}"


def dotted_path(loc: tuple[Any, ...], raw: Any) -> str:
    parts: list[str] = []
    node = raw
    for index, part in enumerate(loc):
        if isinstance(part, int) and isinstance(node, list):
            entry = node[part] if 0 <= part < len(node) else None
            name = entry.get("name") if isinstance(entry, dict) else None
            if isinstance(name, str) and name and name.isprintable() and tuple(loc[:index]) == ("stages",):
                parts.append(name)
            elif isinstance(entry, dict) and tuple(loc[:index]) == ("process_local_edges",) and isinstance(entry.get("src"), str):
                parts.append(f"{entry.get('src')}->{entry.get('dst')}")
            else:
                parts[-1:] = [f"{parts[-1]}[{part}]"] if parts else [f"[{part}]"]
            node = entry
        elif isinstance(part, str) and parts and (part == "" or not part.isprintable()):  # would vanish or break the line
            parts[-1] += f"[{part!r}]"
            node = node.get(part) if isinstance(node, dict) else None
        else:
            parts.append(str(part))
            node = node.get(part) if isinstance(node, dict) else None
    return ".".join(parts) if parts else "(config)"


def _model_at(loc: tuple[Any, ...]) -> str | None:
    model: str | None = "PipelineConfig"
    skip_key = False
    for part in loc:
        if model is None:
            return None
        if skip_key:
            skip_key = False
            continue
        if isinstance(part, int):
            continue
        child = _CHILDREN.get(model, {}).get(str(part))
        if child is None:
            return None
        if (model, part) in (("PipelineConfig", "processes"), ("StageConfig", "knobs")):  # keyed by a name
            skip_key = True
        model = child
    return model


def _fields_of(model: str) -> list[str]:
    from . import schema

    return list(getattr(schema, model).model_fields)
