"""Load a pipeline: model file < deployment files (``extends:``) < CLI overrides.

Every layer is checked against the tier rules before anything is validated, and
all problems of all layers are reported together.
"""

from __future__ import annotations

import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_core import ValidationError

from .errors import COMMAND_LINE, ConfigError, ConfigFileError, ConfigIssue
from .gcpause import paused_gc
from .knobs import knob_issues
from .layering import apply_layer, flatten_deployment, kind_of, regroup_names
from .locations import Origin, Origins, attach, file_origins, locate
from .overrides import Override, ValueParseError, parse_overrides, parse_value
from .registry import registered_models, resolve_model
from .suggest import did_you_mean
from .validation import issues_from_validation_error
from .yamlread import plain_copy, read_document

if TYPE_CHECKING:
    from .schema import PipelineConfig

MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_EXTENDS_DEPTH = 16


@dataclass
class _Origins:
    """Where values came from: per file, and for the layered result (the last layer to set a path wins)."""

    merged: Origins = field(default_factory=dict)
    files: dict[str, Origins] = field(default_factory=dict)


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> PipelineConfig:
    """A full pipeline file or a deployment file, with CLI overrides applied.

    Every error carries the file, line and column of the node it is about (or
    names the command-line flag); so do the compiler's errors for this config.
    """
    origins = _Origins()
    with paused_gc():
        try:
            raw, issues = _load_layers(Path(path), (), origins)
        except ConfigError as exc:
            raise ConfigError(locate(exc.issues, origins.merged, origins.files)) from None
        return _finish(raw, issues, overrides, origins)


def load_model(name_or_path: str | Path, overrides: Sequence[str] = ()) -> PipelineConfig:
    """A registered model name (``--model``) or a pipeline file / directory."""
    return load_config(resolve_model_source(name_or_path), overrides)


def resolve_model_source(name_or_path: str | Path) -> Path:
    text = str(name_or_path)
    candidate = Path(text)
    if candidate.is_dir():
        candidate = candidate / "pipeline.yaml"
    if candidate.is_file() or (candidate.exists() and not candidate.is_dir()):
        return candidate  # a pipe or device is refused by the reader, with that reason
    registered = resolve_model(text)
    if registered is not None:
        return registered
    issue = _unknown_model_issue("model", text)
    raise ConfigFileError(text, "no such file, and " + issue.rule, issue.fix)


def raw_config(data: dict[str, Any], overrides: Sequence[str] = ()) -> PipelineConfig:
    """Validate an in-memory full config (already parsed YAML) with CLI overrides.

    The data is copied first, without keeping shared references (one mapping
    used by two stages becomes two), so an override changes only what it names.
    """
    with paused_gc():
        return _finish(plain_copy(data), [], overrides, None)


def _finish(raw: dict[str, Any], issues: list[ConfigIssue], overrides: Sequence[str], origins: _Origins | None) -> PipelineConfig:
    pairs, parse_issues = parse_overrides(list(overrides))
    issues.extend(parse_issues)
    cli_layer: list[Override] = []
    seen: dict[tuple[str, ...], Override] = {}
    for path, text in pairs:
        path = regroup_names(path, raw)
        kind = kind_of(path)
        try:
            value = parse_value(text, kind) if kind is not None else text
        except ValueParseError as exc:
            issues.append(ConfigIssue(".".join(path), str(exc), "quote or correct the value", value=text, source=COMMAND_LINE))
            continue
        override = Override(path, value, text, COMMAND_LINE, Origin(COMMAND_LINE))
        earlier = seen.get(path)
        if earlier is not None:
            if earlier.value != value:
                issues.append(ConfigIssue(override.dotted, f"given twice on the command line with different values ({earlier.raw!r} and {text!r})", "pass each override once", value=text, source=COMMAND_LINE))
            continue
        seen[path] = override
        cli_layer.append(override)
    issues.extend(apply_layer(raw, cli_layer))
    if origins is not None:
        origins.merged.update((item.dotted, item.origin) for item in cli_layer if item.origin)
    from .schema import PipelineConfig

    config = None
    try:
        config = PipelineConfig.model_validate(raw)
    except ValidationError as exc:
        issues.extend(issues_from_validation_error(exc, raw))
    if config is not None:
        issues.extend(knob_issues(config))
    if issues:
        raise ConfigError(locate(issues, origins.merged, origins.files) if origins is not None else issues)
    assert config is not None
    if origins is not None:
        attach(config, origins.merged)
    return config


def _read_yaml(path: Path) -> tuple[dict[str, Any], Origins, list[ConfigIssue]]:
    source = str(path)
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file (a pipe, socket or device)"
            fix = "pass the pipeline YAML file inside it" if stat.S_ISDIR(info.st_mode) else "pass a regular YAML file"
            raise ConfigFileError(source, f"is {kind}", fix)
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigFileError(source, f"the file is {info.st_size} bytes; config files are limited to {MAX_CONFIG_BYTES}", "split or shrink the file")
        with path.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigFileError(source, f"the file is over {MAX_CONFIG_BYTES} bytes", "split or shrink the file")
        text = data.decode("utf-8")
    except ConfigFileError:
        raise
    except FileNotFoundError:
        raise ConfigFileError(source, "no such file", "check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(source, f"cannot read: {exc}", "check the file's permissions and encoding (UTF-8)") from None
    document = read_document(text, source)
    if document.data is None:
        raise ConfigFileError(source, "the file is empty", "write a pipeline config (see `omni-compile schema`)")
    if not isinstance(document.data, dict):
        raise ConfigFileError(source, f"the top level is a {type(document.data).__name__}, not a mapping", "the file must be a mapping with a 'stages' list", 1, 1)
    return document.data, file_origins(document.marks, document.data, source), list(document.issues)


def _load_layers(path: Path, chain: tuple[Path, ...], origins: _Origins) -> tuple[dict[str, Any], list[ConfigIssue]]:
    resolved = path.resolve()
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in (*chain, resolved))
        raise ConfigError([ConfigIssue("extends", f"deployment files extend each other in a cycle: {cycle}", "make the chain end at a full model pipeline file", source=str(path))])
    if len(chain) >= MAX_EXTENDS_DEPTH:
        raise ConfigError([ConfigIssue("extends", f"more than {MAX_EXTENDS_DEPTH} levels of extends", "shorten the chain", source=str(path))])
    data, file_map, read_issues = _read_yaml(path)
    origins.files[str(path)] = file_map
    if "extends" not in data:
        origins.merged.update(file_map)
        return data, read_issues
    base_ref = data.get("extends")
    if not isinstance(base_ref, str) or not base_ref:
        raise ConfigError([ConfigIssue("extends", "extends must be a model name or a path relative to this file", "write extends: <model name or path>", value=base_ref, source=str(path))])
    base_path = _resolve_extends(base_ref, path)
    raw, issues = _load_layers(base_path, (*chain, resolved), origins)
    issues.extend(read_issues)
    layer, flatten_issues = flatten_deployment(data, str(path), file_map)
    issues.extend(flatten_issues)
    issues.extend(apply_layer(raw, layer))
    origins.merged.update((item.dotted, item.origin) for item in layer if item.origin)
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
