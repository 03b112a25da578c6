"""Deployment layers: a deployment file or the command line, as ``(path, value)`` settings.

Both sources are flattened into :class:`~omni_config.overrides.Override` values
and applied to the model's raw config by one function, so the tier rules
(only deployment fields), stage names and field names are checked alike for
both, and every violation is reported with the setting's path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import tiers
from .errors import ConfigIssue
from .locations import Origins, lookup
from .overrides import Override
from .suggest import did_you_mean


def regroup_names(path: tuple[str, ...], raw: Any) -> tuple[str, ...]:
    """Re-join a stage or process name that itself contains dots (``--processes.0.10.num_replicas``).

    Names may contain '.', and splitting the flag on every dot would make such a
    stage or process unreachable from the command line.
    """
    if path[0] == "processes" and len(path) > 3:
        width = tiers.process_field_width(path)
        return ("processes", ".".join(path[1:-width]), *path[-width:])
    if path[0] == "stages" and len(path) > 3 and isinstance(raw, dict) and isinstance(raw.get("stages"), list):
        names = {s["name"] for s in raw["stages"] if isinstance(s, dict) and isinstance(s.get("name"), str)}
        for end in range(len(path) - 1, 2, -1):  # the longest stage name wins
            if ".".join(path[1:end]) in names:
                return ("stages", ".".join(path[1:end]), *path[end:])
    return path


def flatten_deployment(data: dict[str, Any], source: str, origins: Origins) -> tuple[list[Override], list[ConfigIssue]]:
    """A deployment file's settings as overrides, each with the line it was written on."""
    layer: list[Override] = []
    issues: list[ConfigIssue] = []
    for key, value in data.items():
        if key == "extends":
            continue
        if key in tiers.PIPELINE_MODEL_FIELDS:
            issues.append(model_tier_issue(key, key, value, source))
        elif key == "stages":
            if not isinstance(value, list):
                issues.append(ConfigIssue("stages", "a deployment file lists stages as a list of {name: ..., process: ...} entries", "write stages: [{name: vocoder, process: vocoder}]", value=value, source=source))
                continue
            for index, entry in enumerate(value):
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    issues.append(ConfigIssue(f"stages[{index}]", "each stage entry needs a 'name' naming a stage of the model", "add name: <stage>", value=entry, source=source))
                    continue
                name = entry["name"]
                for field_name, field_value in entry.items():
                    if field_name == "name":
                        continue
                    _flatten(("stages", name, field_name), field_value, layer, source, origins)
        elif key in ("processes", "placement"):
            _flatten((key,), value, layer, source, origins)
        else:
            issues.append(ConfigIssue(key, "unknown top-level key", did_you_mean(key, tiers.ALL_PIPELINE_KEYS, "keys"), value=value, source=source))
    return layer, issues


def _flatten(prefix: tuple[str, ...], value: Any, out: list[Override], source: str, origins: Origins) -> None:
    is_leaf = (
        not isinstance(value, dict)
        or not value
        or (prefix[0] == "stages" and len(prefix) >= 4 and prefix[2] == "factory_args")
        or (prefix[0] == "stages" and prefix[2] in tiers.STAGE_MODEL_FIELDS)
    )
    if is_leaf:
        out.append(Override(prefix, value, None, source, lookup(origins, ".".join(prefix))))
        return
    for key, sub in value.items():
        _flatten((*prefix, str(key)), sub, out, source, origins)


def kind_of(path: tuple[str, ...]) -> tiers.ValueKind | None:
    root = path[0]
    if root == "stages" and len(path) >= 3:
        field = ".".join(path[2:])
        if path[2] == "factory_args":
            return tiers.ValueKind.ANY
        return tiers.STAGE_DEPLOYMENT_FIELDS.get(field)
    if root == "processes" and len(path) >= 3:
        found = tiers.process_field(path[2:])
        if found is None:
            return None
        return tiers.process_field_kind(*found)
    if root == "placement" and len(path) == 2:
        return tiers.PLACEMENT_FIELDS.get(path[1])
    return None


def _set_nested(entry: Any, keys: tuple[str, ...], value: Any) -> None:
    """``entry[k0][k1]... = value``, creating maps on the way (a non-map in the way is left for validation to report)."""
    for key in keys[:-1]:
        if not isinstance(entry, dict):
            return
        entry = entry.setdefault(key, {})
    if isinstance(entry, dict):
        entry[keys[-1]] = value


def model_tier_issue(dotted: str, field: str, value: Any, source: str) -> ConfigIssue:
    if field == "extends":
        return ConfigIssue(dotted, "'extends' names the base config of a deployment file; it is not a setting", "remove it from the overrides; put extends: at the top of a deployment file", value=value, source=source)
    why = tiers.MODEL_TIER_WHY.get(field, "the model tier")
    if field == "name" and dotted.startswith("stages."):
        why = "the stage's name"
    return ConfigIssue(
        dotted,
        f"'{field}' is {why}, which belongs to the model tier; a deployment file or the command line may only set deployment fields",
        "edit the model's pipeline file instead, or drop this setting",
        value=value,
        source=source,
    )


def apply_layer(raw: dict[str, Any], layer: Sequence[Override]) -> list[ConfigIssue]:
    """Apply deployment-tier settings in order; report every tier or name violation."""
    issues: list[ConfigIssue] = []
    stages = raw.get("stages")
    by_name = {s["name"]: s for s in stages if isinstance(s, dict) and isinstance(s.get("name"), str)} if isinstance(stages, list) else {}
    for item in layer:
        path = item.path
        root = path[0]
        if root in tiers.PIPELINE_MODEL_FIELDS or root == "extends":
            issues.append(model_tier_issue(item.dotted, root, item.value, item.source))
        elif root == "stages":
            issue = _apply_stage(by_name, item)
            if issue:
                issues.append(issue)
        elif root == "processes":
            found = tiers.process_field(path[2:]) if len(path) >= 3 else None
            if found is None:
                field = ".".join(path[2:])
                known = (*tiers.PROCESS_FIELDS, *tiers.PROCESS_MAP_FIELDS)
                issues.append(ConfigIssue(item.dotted, "unknown process field" if field else "processes settings name a process and a field", did_you_mean(field, known, "process fields") if field else "write processes.<process>.num_replicas", value=item.value, source=item.source))
                continue
            processes = raw.setdefault("processes", {})
            if not isinstance(processes, dict):
                processes = raw["processes"] = {}
            _set_nested(processes.setdefault(path[1], {}), path[2:], item.value)
        elif root == "placement":
            if len(path) != 2 or path[1] not in tiers.PLACEMENT_FIELDS:
                field = ".".join(path[1:])
                issues.append(ConfigIssue(item.dotted, "unknown placement field", did_you_mean(field, tiers.PLACEMENT_FIELDS, "placement fields"), value=item.value, source=item.source))
                continue
            placement = raw.setdefault("placement", {})
            if isinstance(placement, dict):
                placement[path[1]] = item.value
        else:
            issues.append(ConfigIssue(item.dotted, f"unknown setting '{root}'", did_you_mean(root, (*tiers.PIPELINE_DEPLOYMENT_ROOTS, *tiers.PIPELINE_MODEL_FIELDS), "top-level keys"), value=item.value, source=item.source))
    return issues


def _apply_stage(by_name: dict[str, dict[str, Any]], item: Override) -> ConfigIssue | None:
    path = item.path
    if len(path) < 3:
        return ConfigIssue(item.dotted, "stage settings name a stage and a field", "write stages.<stage>.<field>, e.g. stages.vocoder.process", value=item.value, source=item.source)
    name, field = path[1], ".".join(path[2:])
    stage = by_name.get(name)
    if stage is None:
        return ConfigIssue(
            f"stages.{name}",
            "no such stage in the model; adding a stage belongs to the model tier",
            did_you_mean(name, by_name, "stage names"),
            value=name,
            source=item.source,
        )
    if path[2] in tiers.STAGE_MODEL_FIELDS:
        return model_tier_issue(item.dotted, path[2], item.value, item.source)
    if path[2] == "factory_args":
        if len(path) != 4:
            return ConfigIssue(item.dotted, "factory_args settings name one argument", "write stages.<stage>.factory_args.<argument>", value=item.value, source=item.source)
        declared = stage.get("factory_args") if isinstance(stage.get("factory_args"), dict) else {}
        knobs = stage.get("knobs")
        if isinstance(knobs, dict) and knobs and path[3] not in knobs:
            fixed = path[3] in declared
            return ConfigIssue(
                item.dotted,
                f"'{path[3]}' of stage '{name}' is fixed by the model, not a knob; a deployment may set the stage's declared knobs only"
                if fixed
                else f"stage '{name}' declares no knob '{path[3]}'; a deployment may set the stage's declared knobs only",
                did_you_mean(path[3], knobs, "knobs of this stage") if not fixed else f"drop this setting; the knobs of this stage are: {', '.join(knobs)}",
                value=item.value,
                source=item.source,
            )
        if path[3] not in declared:
            return ConfigIssue(
                item.dotted,
                f"stage '{name}' declares no factory argument '{path[3]}'; a deployment may set the values of declared arguments only",
                did_you_mean(path[3], declared, "factory arguments of this stage"),
                value=item.value,
                source=item.source,
            )
        stage.setdefault("factory_args", {})[path[3]] = item.value
        return None
    if field not in tiers.STAGE_DEPLOYMENT_FIELDS:
        candidates = [*tiers.STAGE_DEPLOYMENT_FIELDS, "factory_args"]
        return ConfigIssue(item.dotted, "unknown stage field", did_you_mean(field, candidates, "deployment fields of a stage"), value=item.value, source=item.source)
    target = stage
    for part in path[2:-1]:
        nxt = target.get(part)
        if not isinstance(nxt, dict):
            nxt = target[part] = {}
        target = nxt
    target[path[-1]] = item.value
    return None
