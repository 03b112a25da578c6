"""Steps 1-3: stages -> declared processes -> OS-process groups (TP) -> instances (replicas)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omni_config import ConfigIssue
from omni_config.names import ENDPOINT_NAME_MAX, endpoint_name_problem
from omni_config.suggest import did_you_mean

from .topology import CompiledProcess, ProcessInstance, StagePlacement

if TYPE_CHECKING:
    from omni_config import PipelineConfig, StageConfig

#: OS processes one topology may spawn (replicas and TP ranks included); far above any real
#: deployment, low enough that a hostile file cannot make the compiler build millions.
MAX_OS_PROCESSES = 16_384

@dataclass(frozen=True)
class Grouping:
    processes: tuple[CompiledProcess, ...]
    instances: tuple[ProcessInstance, ...]
    placed_by_replica_devices: frozenset[str]
    """Instances whose GPU comes from ``processes.<P>.replica_devices``."""


def declared_process(stage: StageConfig) -> str:
    return stage.process or stage.name


def group(config: PipelineConfig, issues: list[ConfigIssue]) -> Grouping:
    declared: dict[str, list[StageConfig]] = {}
    for stage in config.stages:
        declared.setdefault(declared_process(stage), []).append(stage)

    processes: list[CompiledProcess] = []
    for name, members in declared.items():
        tp_stages = [s for s in members if s.tp_size > 1]
        if len(tp_stages) > 1:
            names = ", ".join(s.name for s in tp_stages)
            for s in tp_stages[1:]:
                issues.append(ConfigIssue(
                    f"stages.{s.name}.process", f"stages {names} all have tp_size > 1 in process '{name}'; their rank processes '{name}_tp<rank>' would collide",
                    f"give {s.name} its own process: --stages.{s.name}.process {s.name}", value=name))
        plain = tuple(s.name for s in members if s.tp_size == 1)
        num_replicas = config.processes[name].num_replicas if name in config.processes else 1
        ray = _ray_placement(config.processes[name]) if name in config.processes else {}
        restart = _restart_policy(config.processes[name]) if name in config.processes else {}
        settings = config.processes.get(name)
        # an entry that only says where Ray places the process, or how it restarts, neither replicates nor moves it
        policy_only = (
            settings is not None
            and (ray or "restart" in getattr(settings, "model_fields_set", ()))
            and settings.num_replicas == 1
            and settings.replica_devices is None
        )
        replicated_by = name if settings is not None and not policy_only else None
        if plain:
            processes.append(CompiledProcess(name, plain, name, None, 1, num_replicas, replicated_by, ray, restart))
        if tp_stages:
            tp = tp_stages[0]
            for rank in range(tp.tp_size):
                rank_name = f"{name}_tp{rank}"
                if rank_name in declared:
                    issues.append(ConfigIssue(
                        f"stages.{tp.name}.tp_size", f"tensor parallelism names the rank process '{rank_name}', which is already a declared process",
                        f"rename the process '{rank_name}' or give {tp.name} another process name", value=tp.tp_size))
                processes.append(CompiledProcess(rank_name, (tp.name,), name, rank, tp.tp_size, num_replicas, replicated_by, ray, restart))
        for s in members:
            if s.gpu is not None and len(s.gpu_ids) != s.tp_size:
                    issues.append(ConfigIssue(
                        f"stages.{s.name}.gpu", f"gpu lists one GPU id per TP rank: {len(s.gpu_ids)} id(s) for tp_size {s.tp_size}",
                        f"give {s.tp_size} GPU id(s), e.g. --stages.{s.name}.gpu {','.join(str(i) for i in range(s.tp_size))}" if s.tp_size > 1 else f"give one id: --stages.{s.name}.gpu {s.gpu_ids[0] if s.gpu_ids else 0}",
                        value=s.gpu))

    for key in config.processes:
        if key not in declared:
            issues.append(ConfigIssue(f"processes.{key}", "no stage runs in this process", did_you_mean(key, declared, "process names"), value=key))

    total = sum(p.num_replicas for p in processes)
    if total > MAX_OS_PROCESSES:
        issues.append(ConfigIssue("processes", f"the topology would spawn {total} OS processes (replicas x TP ranks), over the limit of {MAX_OS_PROCESSES}",
                                  "lower num_replicas or tp_size", value=total))
        return Grouping(tuple(processes), (), frozenset())
    stages_by_name = {s.name: s for s in config.stages}
    instances: list[ProcessInstance] = []
    moved: set[str] = set()
    device_groups = _device_groups(config, declared, issues)
    for process in processes:
        groups = device_groups.get(process.declared_process)
        for replica in range(process.num_replicas):
            suffix = f"@r{replica}" if process.num_replicas > 1 else ""
            placements = []
            for stage_name in process.stages:
                stage = stages_by_name[stage_name]
                rank = process.tp_rank
                gpu = _gpu_of(stage, rank)
                if groups is not None and gpu is not None:
                    gpu = groups[replica][rank if rank is not None else 0]
                placements.append(StagePlacement(stage_name, stage_name + suffix, rank, stage.tp_size, gpu, stage.memory_fraction))
            instance_name = process.name + suffix
            if groups is not None:
                moved.add(instance_name)
            instances.append(ProcessInstance(instance_name, process.name, replica if process.num_replicas > 1 else None, tuple(placements)))
    _check_endpoint_names(processes, instances, declared, issues)
    return Grouping(tuple(processes), tuple(instances), frozenset(moved))


def _check_endpoint_names(processes: list[CompiledProcess], instances: list[ProcessInstance], declared: dict[str, list[StageConfig]], issues: list[ConfigIssue]) -> None:
    """Each OS process is an endpoint the runtime names ``<process>[_tp<rank>][@r<replica>]``; refuse what it would refuse at start."""
    declared_of = {p.name: p.declared_process for p in processes}
    reported: set[str] = set()
    for instance in sorted(instances, key=lambda i: -len(i.name)):
        process = declared_of[instance.process]
        problem = endpoint_name_problem(instance.name)
        if problem is None or process in reported:
            continue
        reported.add(process)
        stage = declared[process][0]
        field = "process" if stage.process else "name"
        room = ENDPOINT_NAME_MAX - (len(instance.name) - len(process))
        issues.append(ConfigIssue(f"stages.{stage.name}.{field}", problem,
                                  f"shorten the process name '{process}' to at most {room} characters (the runtime adds '{instance.name[len(process):]}' for TP ranks and replicas)"
                                  if instance.name != process else f"shorten the process name to at most {ENDPOINT_NAME_MAX} characters", value=process))


def _gpu_of(stage: StageConfig, rank: int | None) -> int | None:
    ids = stage.gpu_ids
    if not ids:
        return None
    index = rank or 0
    return ids[index] if index < len(ids) else ids[0]


def _device_groups(config: PipelineConfig, declared: dict[str, list[StageConfig]], issues: list[ConfigIssue]) -> dict[str, list[tuple[int, ...]]]:
    """replica_devices split into one consecutive group of tp_size ids per replica."""
    out: dict[str, list[tuple[int, ...]]] = {}
    for name, settings in config.processes.items():
        members = declared.get(name)
        if members is None:
            continue
        group_size = max(s.tp_size for s in members)
        is_gpu = any(s.gpu is not None for s in members)
        devices = settings.replica_devices
        path = f"processes.{name}.replica_devices"
        if devices is None:
            if settings.num_replicas > 1 and is_gpu:
                example = ",".join(str(i) for i in range(settings.num_replicas * group_size))
                issues.append(ConfigIssue(path, f"process '{name}' has GPU stages and num_replicas {settings.num_replicas}; replicated GPU processes need replica_devices ({settings.num_replicas} x tp_size {group_size} ids)",
                                          f"--processes.{name}.replica_devices {example}"))
            continue
        if not is_gpu:
            issues.append(ConfigIssue(path, f"process '{name}' has no GPU stage (no stage declares gpu), so replica_devices has nothing to place", f"remove {path}, or declare gpu on the process's GPU stages", value=devices))
            continue
        expected = settings.num_replicas * group_size
        if len(devices) != expected:
            issues.append(ConfigIssue(path, f"needs num_replicas x tp_size = {settings.num_replicas} x {group_size} = {expected} GPU ids, got {len(devices)}",
                                      f"give exactly {expected} ids, one consecutive group of {group_size} per replica", value=devices))
            continue
        groups = [tuple(devices[i * group_size:(i + 1) * group_size]) for i in range(settings.num_replicas)]
        bad = False
        for index, grp in enumerate(groups):
            if len(set(grp)) != len(grp):
                bad = True
                issues.append(ConfigIssue(path, f"replica {index} repeats a GPU inside its group {list(grp)}; ids must be unique inside a replica's group (they may repeat across replicas)",
                                          "give each TP rank of a replica its own GPU", value=devices))
        if not bad:
            out[name] = groups
    return out



def _ray_placement(settings: Any) -> dict[str, Any]:
    """The keys of ``processes.<P>.ray`` that are set, as plain data (the compiler never imports Ray)."""
    ray = getattr(settings, "ray", None)
    if ray is None:
        return {}
    out: dict[str, Any] = {}
    if ray.resources:
        out["resources"] = dict(ray.resources)
    if ray.num_cpus is not None:
        out["num_cpus"] = ray.num_cpus
    if ray.label_selector:
        out["label_selector"] = dict(ray.label_selector)
    return out


def _restart_policy(settings: Any) -> dict[str, Any]:
    """``processes.<P>.restart`` as plain data for the runtime's supervisor."""
    restart = getattr(settings, "restart", None)
    if restart is None:
        return {}
    return {"max_restarts": restart.max_restarts, "window_s": restart.window_s, "backoff_s": restart.backoff_s}
