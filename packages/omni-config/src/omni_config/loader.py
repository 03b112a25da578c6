"""Load a pipeline: model file < deployment files (``extends:``) < CLI overrides.

Every layer is checked against the tier rules before anything is validated, and
all problems of all layers are reported together.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic_core import ValidationError

from . import tiers
from .errors import ConfigError, ConfigFileError, ConfigIssue
from .gcpause import paused_gc
from .overrides import Override, ValueParseError, parse_overrides, parse_value
from .registry import registered_models, resolve_model
from .suggest import did_you_mean
from .validation import issues_from_validation_error

if TYPE_CHECKING:
    from .schema import PipelineConfig

MAX_CONFIG_BYTES = 4 * 1024 * 1024
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_EXTENDS_DEPTH = 16


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> PipelineConfig:
    """A full pipeline file or a deployment file, with CLI overrides applied."""
    with paused_gc():
        raw, issues = _load_layers(Path(path), chain=())
        return _finish(raw, issues, overrides)


def load_model(name_or_path: str | Path, overrides: Sequence[str] = ()) -> PipelineConfig:
    """A registered model name (``--model-path``) or a pipeline file / directory."""
    return load_config(resolve_model_source(name_or_path), overrides)


def resolve_model_source(name_or_path: str | Path) -> Path:
    text = str(name_or_path)
    candidate = Path(text)
    if candidate.is_dir():
        candidate = candidate / "pipeline.yaml"
    if candidate.is_file():
        return candidate
    registered = resolve_model(text)
    if registered is not None:
        return registered
    issue = _unknown_model_issue("model_path", text)
    raise ConfigFileError(text, "no such file, and " + issue.rule, issue.fix)


def raw_config(data: dict[str, Any], overrides: Sequence[str] = ()) -> PipelineConfig:
    """Validate an in-memory full config (already parsed YAML) with CLI overrides."""
    with paused_gc():
        return _finish(copy.deepcopy(data), [], overrides)


def _finish(raw: dict[str, Any], issues: list[ConfigIssue], overrides: Sequence[str]) -> PipelineConfig:
    pairs, parse_issues = parse_overrides(list(overrides))
    issues.extend(parse_issues)
    cli_layer: list[Override] = []
    seen: dict[tuple[str, ...], Override] = {}
    for path, text in pairs:
        path = _regroup_names(path, raw)
        kind = _kind_of(path)
        try:
            value = parse_value(text, kind) if kind is not None else text
        except ValueParseError as exc:
            issues.append(ConfigIssue(".".join(path), str(exc), "quote or correct the value", value=text, source="command line"))
            continue
        override = Override(path, value, text, "command line")
        earlier = seen.get(path)
        if earlier is not None:
            if earlier.value != value:
                issues.append(ConfigIssue(override.dotted, f"given twice on the command line with different values ({earlier.raw!r} and {text!r})", "pass each override once", value=text, source="command line"))
            continue
        seen[path] = override
        cli_layer.append(override)
    issues.extend(_apply_layer(raw, cli_layer))
    from .schema import PipelineConfig

    config = None
    try:
        config = PipelineConfig.model_validate(raw)
    except ValidationError as exc:
        issues.extend(issues_from_validation_error(exc, raw))
    if issues:
        raise ConfigError(issues)
    assert config is not None
    return config


def _regroup_names(path: tuple[str, ...], raw: Any) -> tuple[str, ...]:
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


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigFileError(str(path), f"the file is {size} bytes; config files are limited to {MAX_CONFIG_BYTES}", "split or shrink the file")
        text = path.read_text(encoding="utf-8")
    except ConfigFileError:
        raise
    except FileNotFoundError:
        raise ConfigFileError(str(path), "no such file", "check the path") from None
    except IsADirectoryError:
        raise ConfigFileError(str(path), "is a directory", "pass the pipeline YAML file inside it") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(str(path), f"cannot read: {exc}", "check the file's permissions and encoding (UTF-8)") from None
    try:
        data = yaml.load(text, Loader=_SafeLoader)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigFileError(str(path), f"YAML syntax error{where}: {problem}", "fix the YAML syntax") from None
    except RecursionError:
        raise ConfigFileError(str(path), "YAML nesting too deep", "flatten the file") from None
    if data is None:
        raise ConfigFileError(str(path), "the file is empty", "write a pipeline config (see `omni-compile schema`)")
    if not isinstance(data, dict):
        raise ConfigFileError(str(path), f"the top level is a {type(data).__name__}, not a mapping", "the file must be a mapping with a 'stages' list")
    return data


def _load_layers(path: Path, chain: tuple[Path, ...]) -> tuple[dict[str, Any], list[ConfigIssue]]:
    resolved = path.resolve()
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in (*chain, resolved))
        raise ConfigError([ConfigIssue("extends", f"deployment files extend each other in a cycle: {cycle}", "make the chain end at a full model pipeline file", source=str(path))])
    if len(chain) >= MAX_EXTENDS_DEPTH:
        raise ConfigError([ConfigIssue("extends", f"more than {MAX_EXTENDS_DEPTH} levels of extends", "shorten the chain", source=str(path))])
    data = _read_yaml(path)
    if "extends" not in data:
        return data, []
    base_ref = data.get("extends")
    if not isinstance(base_ref, str) or not base_ref:
        raise ConfigError([ConfigIssue("extends", "extends must be a model name or a path relative to this file", "write extends: <model name or path>", value=base_ref, source=str(path))])
    base_path = _resolve_extends(base_ref, path)
    raw, issues = _load_layers(base_path, (*chain, resolved))
    layer, flatten_issues = _flatten_deployment(data, str(path))
    issues.extend(flatten_issues)
    issues.extend(_apply_layer(raw, layer))
    return raw, issues


def _resolve_extends(ref: str, path: Path) -> Path:
    relative = (path.parent / ref)
    if relative.is_dir():
        relative = relative / "pipeline.yaml"
    if relative.is_file():
        return relative
    registered = resolve_model(ref)
    if registered is not None:
        return registered
    raise ConfigError([_unknown_model_issue("extends", ref, source=str(path))])


def _unknown_model_issue(path: str, ref: str, source: str | None = None) -> ConfigIssue:
    names = list(registered_models())
    installed = ", ".join(names) if names else "none installed"
    hint = did_you_mean(ref, names, "model names") if names else "install the model package (e.g. omni-models)"
    return ConfigIssue(
        path,
        f"not a pipeline file (relative to the config file) nor a registered model name (installed models: {installed})",
        f"{hint}; or pass the model's pipeline file path instead",
        value=ref,
        source=source,
    )


def _flatten_deployment(data: dict[str, Any], source: str) -> tuple[list[Override], list[ConfigIssue]]:
    layer: list[Override] = []
    issues: list[ConfigIssue] = []
    for key, value in data.items():
        if key == "extends":
            continue
        if key in tiers.PIPELINE_MODEL_FIELDS:
            issues.append(_model_tier_issue(key, key, value, source))
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
                    _flatten(("stages", name, field_name), field_value, layer, source)
        elif key in ("processes", "placement"):
            _flatten((key,), value, layer, source)
        else:
            issues.append(ConfigIssue(key, "unknown top-level key", did_you_mean(key, tiers.ALL_PIPELINE_KEYS, "keys"), value=value, source=source))
    return layer, issues


def _flatten(prefix: tuple[str, ...], value: Any, out: list[Override], source: str) -> None:
    is_leaf = (
        not isinstance(value, dict)
        or not value
        or (prefix[0] == "stages" and len(prefix) >= 4 and prefix[2] == "factory_args")
        or (prefix[0] == "stages" and prefix[2] in tiers.STAGE_MODEL_FIELDS)
    )
    if is_leaf:
        out.append(Override(prefix, value, None, source))
        return
    for key, sub in value.items():
        _flatten((*prefix, str(key)), sub, out, source)


def _kind_of(path: tuple[str, ...]) -> tiers.ValueKind | None:
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


def _model_tier_issue(dotted: str, field: str, value: Any, source: str) -> ConfigIssue:
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


def _apply_layer(raw: dict[str, Any], layer: Sequence[Override]) -> list[ConfigIssue]:
    """Apply deployment-tier settings in order; report every tier or name violation."""
    issues: list[ConfigIssue] = []
    stages = raw.get("stages")
    by_name = {s["name"]: s for s in stages if isinstance(s, dict) and isinstance(s.get("name"), str)} if isinstance(stages, list) else {}
    for item in layer:
        path = item.path
        root = path[0]
        if root in tiers.PIPELINE_MODEL_FIELDS or root == "extends":
            issues.append(_model_tier_issue(item.dotted, root, item.value, item.source))
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
        return _model_tier_issue(item.dotted, path[2], item.value, item.source)
    if path[2] == "factory_args":
        if len(path) != 4:
            return ConfigIssue(item.dotted, "factory_args settings name one argument", "write stages.<stage>.factory_args.<argument>", value=item.value, source=item.source)
        declared = stage.get("factory_args") if isinstance(stage.get("factory_args"), dict) else {}
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
