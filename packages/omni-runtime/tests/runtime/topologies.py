"""Test topologies, compiled by the real omni-compiler from PipelineConfig values."""

from __future__ import annotations

from typing import Any

from omni_compiler import compile as compile_topology
from omni_compiler.topology import CompiledTopology
from omni_config.schema import PipelineConfig

S = "runtime_stages.basic"


def topology(stages: list[dict[str, Any]], **extra: Any) -> CompiledTopology:
    return compile_topology(PipelineConfig.model_validate({"stages": stages, **extra}))


def _fraction(value: float) -> dict[str, Any]:
    return {"runtime": {"resources": {"total_gpu_memory_fraction": value}}}


def main_topology() -> CompiledTopology:
    """Processes ``front``, ``back`` and two TP ranks ``tp_tp0``/``tp_tp1``; the entry routes each request to one scenario."""
    return topology(
        [
            {"name": "router", "factory": f"{S}:build_router", "process": "front", "route_fn": f"{S}:route_by_mode",
             "next": ["produce", "fan", "boom", "slow", "stream_src", "inj_explicit", "tp_stage", "lstream_src", "pace_src"]},
            {"name": "produce", "factory": f"{S}:build_produce", "process": "front", "next": "consume_local"},
            {"name": "consume_local", "factory": f"{S}:build_consume_local", "process": "front", "next": "cross"},
            {"name": "cross", "factory": f"{S}:build_cross", "process": "back", "terminal": True},
            {"name": "fan", "factory": f"{S}:build_fan", "process": "front", "next": ["left", "right"]},
            {"name": "left", "factory": f"{S}:build_branch", "factory_args": {"label": "left"}, "process": "front", "next": "join"},
            {"name": "right", "factory": f"{S}:build_branch", "factory_args": {"label": "right"}, "process": "back", "next": "join"},
            {"name": "join", "factory": f"{S}:build_join", "process": "back", "wait_for": ["left", "right"],
             "merge_fn": f"{S}:merge_branches", "terminal": True},
            {"name": "boom", "factory": f"{S}:build_boom", "process": "back", "terminal": True},
            {"name": "slow", "factory": f"{S}:build_slow", "process": "back", "terminal": True},
            {"name": "stream_src", "factory": f"{S}:build_stream_source", "process": "front", "stream_to": "stream_sink", "next": "stream_sink"},
            {"name": "stream_sink", "factory": f"{S}:build_stream_sink", "process": "back", "terminal": True},
            {"name": "inj_explicit", "factory": f"{S}:build_inj_explicit", "factory_args": {"label": "L"}, "process": "front", "gpu": 0,
             "next": "inj_kwargs", "env": {"OMNI_TEST_STAGE_ENV": "set-by-config"}, **_fraction(0.1)},
            {"name": "inj_kwargs", "factory": f"{S}:build_inj_kwargs", "factory_args": {"extra": 1}, "process": "front", "gpu": 0,
             "terminal": True, **_fraction(0.15)},
            {"name": "tp_stage", "factory": f"{S}:build_tp_stage", "process": "tp", "tp_size": 2, "gpu": [0, 1], "next": "tp_after",
             **_fraction(0.5)},
            {"name": "lstream_src", "factory": f"{S}:build_local_stream_source", "process": "front", "stream_to": "lstream_sink", "next": "lstream_sink"},
            {"name": "lstream_sink", "factory": f"{S}:build_local_stream_sink", "process": "front", "terminal": True},
            {"name": "tp_after", "factory": f"{S}:build_tp_after", "process": "front", "terminal": True},
            {"name": "pace_src", "factory": f"{S}:build_pace_source", "process": "front", "stream_to": "pace_sink", "next": "pace_sink"},
            {"name": "pace_sink", "factory": f"{S}:build_pace_sink", "process": "back", "terminal": True},
        ]
    )


R = "runtime_stages.replica"


def replica_topology(max_restarts: int = 0, backoff_s: float = 1.0) -> CompiledTopology:
    """``front`` -> ``rep_a`` -> ``rep_b``; rep_a and rep_b share process ``rep``, replicated twice.

    ``max_restarts`` (default 0, fail-stop) is the restart policy of both processes.
    """
    restart = {"max_restarts": max_restarts, "backoff_s": backoff_s}
    return topology(
        [
            {"name": "entry", "factory": f"{R}:build_record", "process": "front", "next": "rep_a"},
            {"name": "rep_a", "factory": f"{R}:build_record", "process": "rep", "next": "rep_b"},
            {"name": "rep_b", "factory": f"{R}:build_record", "process": "rep", "terminal": True},
        ],
        processes={"rep": {"num_replicas": 2, "restart": restart}, "front": {"restart": restart}},
    )


def single_topology(factory: str, **stage: Any) -> CompiledTopology:
    """One stage in one process (startup tests)."""
    return topology([{"name": "only", "factory": factory, "process": "solo", "terminal": True, **stage}])
