"""``compile(config) -> CompiledTopology``: every rule of docs/rules.md.

Pure: no I/O, no driver queries; every independent problem is collected and
raised together as one :class:`TopologyError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from omni_config import ConfigIssue, load_config
from omni_config.gcpause import paused_gc
from omni_config.locations import locate, origins_of

from .errors import TopologyError
from .graph import build_edges, check_contract, check_graph, check_names
from .grouping import declared_process, group
from .placement import check_placement
from .topology import CompiledStage, CompiledTopology

if TYPE_CHECKING:
    from omni_config import PipelineConfig


def compile(config: PipelineConfig, num_gpus: int | None = None) -> CompiledTopology:
    """Compile a validated config (:func:`omni_config.load_config`, :func:`omni_config.raw_config`)."""
    with paused_gc():
        return _compile(config, num_gpus)


def _compile(config: PipelineConfig, num_gpus: int | None) -> CompiledTopology:
    issues: list[ConfigIssue] = []
    if num_gpus is not None and num_gpus < 1:
        issues.append(ConfigIssue("--gpus", "the device count must be at least 1", "pass --gpus N with N >= 1", value=num_gpus))
        num_gpus = None
    names = check_names(config, issues)
    grouping = group(config, issues)
    edges = build_edges(config, grouping.processes, names)
    check_contract(config, edges, grouping.processes, names, issues)
    check_graph(config, edges, names, issues)
    gpus = check_placement(config, grouping, num_gpus, issues)
    if issues:
        raise TopologyError(locate(issues, origins_of(config)))
    stages = tuple(
        CompiledStage(
            name=s.name,
            factory=s.factory,
            process=declared_process(s),
            next=tuple(s.next),
            stream_to=tuple(s.stream_to),
            wait_for=tuple(s.wait_for),
            merge_fn=s.merge_fn,
            route_fn=s.route_fn,
            terminal=s.terminal,
            factory_args=dict(s.factory_args),
            env=dict(s.env),
            tp_size=s.tp_size,
            gpu=s.gpu_ids,
            memory_fraction=s.memory_fraction,
        )
        for s in config.stages
    )
    return CompiledTopology(
        name=config.name,
        entry_stage=config.entry,
        stages=stages,
        processes=grouping.processes,
        instances=grouping.instances,
        edges=edges,
        gpus=gpus,
        num_gpus=num_gpus if num_gpus is not None else config.placement.num_gpus,
    )


def compile_file(path: str | Path, overrides: Sequence[str] = (), num_gpus: int | None = None) -> CompiledTopology:
    """The topology of a pipeline file (full or deployment), with CLI overrides applied."""
    return compile(load_config(path, overrides), num_gpus=num_gpus)
