"""Which fields belong to the model author and which to the operator.

The model tier (wiring, factories, the process-local contract) is what makes a
pipeline correct; the deployment tier (processes, GPUs, fractions, replicas) is
what an operator tunes. A deployment file or a CLI override may only touch the
deployment tier, so a placement change can never silently rewire a model.
"""

from __future__ import annotations

from enum import Enum


class ValueKind(str, Enum):
    """How a CLI string becomes a typed value for a field."""

    TEXT = "text"          # kept verbatim (process names: "123" stays a string)
    SCALAR = "scalar"      # YAML scalar: int, float, bool
    IDS = "ids"            # "1,2" / "[1,2]" -> list; "1" -> 1 (gpu)
    ID_LIST = "id_list"    # "1,2" / "[1,2]" / "1" -> list (replica_devices)
    ANY = "any"            # factory_args values: any YAML value


STAGE_DEPLOYMENT_FIELDS: dict[str, ValueKind] = {
    "process": ValueKind.TEXT,
    "gpu": ValueKind.IDS,
    "tp_size": ValueKind.SCALAR,
    "runtime.resources.total_gpu_memory_fraction": ValueKind.SCALAR,
    "enabled": ValueKind.SCALAR,
}
STAGE_MODEL_FIELDS = ("name", "factory", "next", "terminal", "stream_to", "wait_for", "merge_fn", "route_fn", "env", "knobs", "optional")
PROCESS_FIELDS: dict[str, ValueKind] = {
    "num_replicas": ValueKind.SCALAR,
    "replica_devices": ValueKind.ID_LIST,
    "ray.num_cpus": ValueKind.SCALAR,
    "restart.max_restarts": ValueKind.SCALAR,
    "restart.window_s": ValueKind.SCALAR,
    "restart.backoff_s": ValueKind.SCALAR,
}
#: Process fields that are maps: ``processes.P.ray.resources.node_b 1`` sets one key (typed by the kind).
PROCESS_MAP_FIELDS: dict[str, ValueKind] = {"ray.resources": ValueKind.SCALAR, "ray.label_selector": ValueKind.TEXT}

#: Process fields that group others (``ray: {...}`` in a file, or a whole YAML value on the command line).
PROCESS_GROUPS = ("ray", "restart")


def process_field_kind(field: str, key: str | None) -> ValueKind:
    if key is not None:
        return PROCESS_MAP_FIELDS[field]
    return PROCESS_FIELDS.get(field, ValueKind.ANY)


def process_field(parts: tuple[str, ...]) -> tuple[str, str | None] | None:
    """``(field, map key)`` of a process setting's path after the process name, or None when unknown.

    ``("num_replicas",)`` -> ``("num_replicas", None)``; ``("ray", "resources", "node_b")`` ->
    ``("ray.resources", "node_b")``.
    """
    dotted = ".".join(parts)
    if dotted in PROCESS_FIELDS or dotted in PROCESS_MAP_FIELDS or dotted in PROCESS_GROUPS:
        return dotted, None
    if len(parts) >= 2 and ".".join(parts[:-1]) in PROCESS_MAP_FIELDS:
        return ".".join(parts[:-1]), parts[-1]
    return None


def process_field_width(path: tuple[str, ...]) -> int:
    """How many trailing parts of ``processes.<name...>.<field...>`` are the field (names may contain dots)."""
    for width in (3, 2):
        if len(path) > width + 1 and process_field(path[-width:]) is not None:
            return width
    return 1
PLACEMENT_FIELDS: dict[str, ValueKind] = {
    "max_total_gpu_memory_fraction_per_gpu": ValueKind.SCALAR,
    "require_memory_fraction_for_colocation": ValueKind.SCALAR,
    "num_gpus": ValueKind.SCALAR,
}
PIPELINE_MODEL_FIELDS = ("name", "entry_stage", "process_local_edges")
PIPELINE_DEPLOYMENT_ROOTS = ("stages", "processes", "placement")
ALL_PIPELINE_KEYS = ("extends", *PIPELINE_MODEL_FIELDS, *PIPELINE_DEPLOYMENT_ROOTS)

MODEL_TIER_WHY = {
    "name": "the model's name",
    "factory": "which code builds the stage",
    "next": "the stage wiring",
    "terminal": "the stage wiring",
    "stream_to": "the stage wiring",
    "wait_for": "the stage wiring",
    "merge_fn": "the stage wiring",
    "route_fn": "the stage wiring",
    "env": "the stage's environment",
    "knobs": "the types and ranges of the stage's factory_args",
    "optional": "whether the stage may be switched off",
    "entry_stage": "the stage wiring",
    "process_local_edges": "the model's process-local contract",
}
