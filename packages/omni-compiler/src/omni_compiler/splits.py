"""Override sets that pull a pipeline apart as far as its process-local contract allows.

Comparing a model's default placement with "every stage in its own OS process"
is how the spec says to measure a topology change; which stages must stay
together is the model's contract, so the split is derived from the config
instead of written out per model. Used by the models benchmark and the
models' end-to-end tests.
"""

from __future__ import annotations

from typing import Any


def local_groups(config: Any) -> list[list[str]]:
    """Stages tied together by process-local edges (transitively), each group and its members in declaration order."""
    parent = {s.name: s.name for s in config.stages}

    def find(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for edge in config.process_local_edges:
        parent[find(edge.src)] = find(edge.dst)
    groups: dict[str, list[str]] = {}
    for stage in config.stages:
        groups.setdefault(find(stage.name), []).append(stage.name)
    return list(groups.values())


def fully_split_overrides(config: Any) -> list[str]:
    """``--stages.S.process solo_<first of its group>`` for every stage: one OS process per process-local group."""
    return [token for group in local_groups(config) for name in group for token in (f"--stages.{name}.process", f"solo_{group[0]}")]


def fraction_overrides(config: Any) -> list[str]:
    """A memory fraction for every GPU stage that declares none, so any grouping of the stages is legal on its GPU.

    Each GPU's undeclared stages share equally what the declared ones leave
    under ``placement.max_total_gpu_memory_fraction_per_gpu`` (rounded down to
    0.01). Raises ``ValueError`` when the declared ones leave nothing.
    """
    limit = config.placement.max_total_gpu_memory_fraction_per_gpu
    by_gpu: dict[int, list[Any]] = {}
    for stage in config.stages:
        for gpu in stage.gpu_ids:
            by_gpu.setdefault(gpu, []).append(stage)
    out: list[str] = []
    for stages in by_gpu.values():
        missing = [s for s in stages if s.memory_fraction is None]
        if not missing:
            continue
        declared = sum(s.memory_fraction or 0.0 for s in stages)
        share = int((limit - declared) / len(missing) * 100) / 100
        if share <= 0:
            raise ValueError(f"no GPU memory left to declare for {[s.name for s in missing]}")
        for stage in missing:
            out += [f"--stages.{stage.name}.runtime.resources.total_gpu_memory_fraction", f"{share:.2f}"]
    return out
