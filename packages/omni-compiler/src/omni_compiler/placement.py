"""Step 7: GPU memory-fraction accounting.

Fractions are placement declarations, checked as written: never inferred, never
rewritten. Sharing a GPU across OS processes needs them; the opt-out applies only
when ``StageConfig.gpu`` alone declares the sharing; a process placed through
``replica_devices`` always needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_config import ConfigIssue

from .grouping import Grouping
from .topology import GpuBudget, GpuShare

if TYPE_CHECKING:
    from omni_config import PipelineConfig


def check_placement(config: PipelineConfig, grouping: Grouping, num_gpus: int | None, issues: list[ConfigIssue]) -> tuple[GpuBudget, ...]:
    placement = config.placement
    limit = placement.max_total_gpu_memory_fraction_per_gpu
    count = num_gpus if num_gpus is not None else placement.num_gpus
    shares: dict[int, list[GpuShare]] = {}
    origin: dict[str, str] = {}
    for instance in grouping.instances:
        for p in instance.stages:
            if p.gpu is None:
                continue
            shares.setdefault(p.gpu, []).append(GpuShare(instance.name, p.stage, p.tp_rank, p.memory_fraction))
            origin[instance.name] = instance.process
    if count is not None:
        _check_ids(config, grouping, count, issues)
    missing: dict[str, set[int]] = {}
    declared_of = {p.name: p.declared_process for p in grouping.processes}
    for instance in grouping.instances:
        if instance.name not in grouping.placed_by_replica_devices:
            continue
        declared = declared_of[instance.process]
        for p in instance.stages:
            if p.gpu is not None and p.memory_fraction is None:
                missing.setdefault(p.stage, set()).add(p.gpu)
                _need_fraction(issues, p.stage, f"process '{declared}' is placed by processes.{declared}.replica_devices, and placement from replica_devices always requires memory fractions (num_replicas: 1 included)", limit)
    for gpu, entries in sorted(shares.items()):
        instances = list(dict.fromkeys(s.instance for s in entries))
        if len(instances) > 1:
            from_replica_devices = any(i in grouping.placed_by_replica_devices for i in instances)
            if placement.require_memory_fraction_for_colocation or from_replica_devices:
                for s in entries:
                    if s.memory_fraction is None and gpu not in missing.get(s.stage, set()):
                        missing.setdefault(s.stage, set()).add(gpu)
                        why = "" if placement.require_memory_fraction_for_colocation else " (require_memory_fraction_for_colocation: false does not apply: replica_devices takes part in this sharing)"
                        _need_fraction(issues, s.stage, f"GPU {gpu} is shared by OS processes {', '.join(instances)}; every GPU stage on a shared GPU must declare its memory fraction{why}", limit)
        total = round(sum(s.memory_fraction or 0.0 for s in entries), 6)
        if total > limit + 1e-9:
            detail = ", ".join(f"{s.instance}/{s.stage}{'' if s.tp_rank is None else f'[tp{s.tp_rank}]'} {s.memory_fraction}" for s in entries if s.memory_fraction)
            issues.append(ConfigIssue(
                "placement.max_total_gpu_memory_fraction_per_gpu",
                f"GPU {gpu}: declared memory fractions sum to {total:g} ({detail}), over the per-GPU limit {limit:g}",
                f"lower stages' runtime.resources.total_gpu_memory_fraction on GPU {gpu}, or move a stage to another GPU",
                value=limit))
    return tuple(GpuBudget(gpu, tuple(entries), limit) for gpu, entries in sorted(shares.items()))


def _need_fraction(issues: list[ConfigIssue], stage: str, rule: str, limit: float) -> None:
    issues.append(ConfigIssue(
        f"stages.{stage}.runtime.resources.total_gpu_memory_fraction", rule,
        f"declare it: --stages.{stage}.runtime.resources.total_gpu_memory_fraction <fraction> (fractions on one GPU must sum to <= {limit:g})"))


def _check_ids(config: PipelineConfig, grouping: Grouping, count: int, issues: list[ConfigIssue]) -> None:
    valid = f"valid ids are 0..{count - 1}"
    moved = {name for name, settings in config.processes.items() if settings.replica_devices is not None}
    for stage in config.stages:
        if (stage.process or stage.name) in moved:
            continue  # replica_devices decides where this stage runs; its ids are checked below
        for gpu in stage.gpu_ids:
            if gpu >= count:
                issues.append(ConfigIssue(f"stages.{stage.name}.gpu", f"GPU {gpu} does not exist on a machine with {count} GPU(s)", f"use a GPU id below {count} ({valid})", value=stage.gpu))
                break
    for name, settings in config.processes.items():
        bad = [d for d in settings.replica_devices or () if d >= count]
        if bad:
            issues.append(ConfigIssue(f"processes.{name}.replica_devices", f"GPU(s) {bad} do not exist on a machine with {count} GPU(s)", f"use GPU ids below {count} ({valid})", value=settings.replica_devices))
