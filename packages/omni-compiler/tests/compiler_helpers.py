"""Helpers for the omni-compiler tests.

Pipelines are plain dicts (what YAML parses to), built with :func:`stage` and
:func:`pipeline`, or loaded from the spec-shaped fixtures under ``fixtures/``.
Factories are dotted paths that are never imported: the compiler must not. A
uniquely named module (not ``conftest``) so several packages' suites can run in
one pytest process.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from omni_compiler import CompiledTopology, TopologyError, compile
from omni_config import ConfigError, raw_config

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_dict(name: str) -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load((FIXTURES / f"{name}.yaml").read_text()))


def stage(name: str, **fields: Any) -> dict[str, Any]:
    """A stage dict; ``runtime.resources.total_gpu_memory_fraction`` via ``fraction=``."""
    fraction = fields.pop("fraction", None)
    out = {"name": name, "factory": f"tests.fake_stages:build_{name}", **fields}
    if fraction is not None:
        out["runtime"] = {"resources": {"total_gpu_memory_fraction": fraction}}
    return out


def chain(*names: str, **common: Any) -> list[dict[str, Any]]:
    """A linear pipeline a -> b -> ... -> last (terminal)."""
    out = []
    for index, name in enumerate(names):
        wiring = {"terminal": True} if index == len(names) - 1 else {"next": names[index + 1]}
        out.append(stage(name, **wiring, **common))
    return out


def pipeline(stages: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {"stages": stages, **top}


def compiled(data: dict[str, Any], overrides: Sequence[str] = (), num_gpus: int | None = None) -> CompiledTopology:
    return compile(raw_config(data, overrides), num_gpus=num_gpus)


def compile_error(data: dict[str, Any], overrides: Sequence[str] = (), num_gpus: int | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        compiled(data, overrides, num_gpus)
    return info.value


def topology_error(data: dict[str, Any], overrides: Sequence[str] = (), num_gpus: int | None = None) -> TopologyError:
    """The config is well-formed, so the compiler (not the loader) must be the one refusing it."""
    config = raw_config(data, overrides)
    with pytest.raises(TopologyError) as info:
        compile(config, num_gpus=num_gpus)
    return info.value


def paths(error: ConfigError) -> list[str]:
    return [issue.path for issue in error.issues]


def only(error: ConfigError, path: str):
    matches = [issue for issue in error.issues if issue.path == path]
    assert len(matches) == 1, f"expected one issue at {path!r}, got {[i.path for i in error.issues]}"
    return matches[0]


def table_rows(topology: CompiledTopology) -> list[tuple[str, tuple[str, ...]]]:
    return [(p.name, p.stages) for p in topology.processes]


def instance_gpus(topology: CompiledTopology) -> dict[str, dict[str, int | None]]:
    """instance name -> {instance_stage (with [tp<rank>] for a TP rank): gpu}."""
    out: dict[str, dict[str, int | None]] = {}
    for instance in topology.instances:
        out[instance.name] = {
            p.instance_stage + ("" if p.tp_rank is None else f"[tp{p.tp_rank}]"): p.gpu for p in instance.stages
        }
    return out
