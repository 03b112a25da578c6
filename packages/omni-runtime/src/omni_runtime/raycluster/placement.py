"""What each process instance asks Ray for: a pure function of the compiled topology.

Kept free of any ``ray`` import so the rules are unit-tested without a cluster
(and without GPUs): the launcher turns an :class:`ActorRequest` into actor
options, and a :class:`GroupRequest` into a ``STRICT_PACK`` placement group.

GPUs follow the config's declarations:

* an instance that owns its GPUs (no declared ``total_gpu_memory_fraction`` on
  them) asks for that many whole GPUs;
* an instance whose stages share one GPU under declared fractions asks for the
  sum of its fractions of it (Ray packs fractional requests on one device);
* the TP ranks of one stage (per replica) are one placement group, one bundle
  per rank, ``STRICT_PACK``, so they land on one node;
* ``--device cpu`` runs every stage on the CPU and asks for no GPU at all.

The config's GPU ids are logical. Ray decides which physical devices an actor
gets and sets ``CUDA_VISIBLE_DEVICES`` to them, so inside the actor the devices
are ``cuda:0..k-1`` in the order Ray lists them; :func:`logical_gpu_map` maps
each logical id of the instance onto that local index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omni_compiler.topology import CompiledTopology, ProcessInstance

BUNDLE_MIN_CPU = 0.01
"""A placement group bundle may not be empty; CPU-only TP ranks reserve this much."""


@dataclass(frozen=True)
class ActorRequest:
    """Resources and constraints of one instance's actor."""

    instance: str
    num_cpus: float
    num_gpus: float
    resources: dict[str, float] = field(default_factory=dict)
    label_selector: dict[str, str] = field(default_factory=dict)
    group: str | None = None
    """Key of the placement group this actor is placed in (TP ranks), else None."""
    bundle_index: int | None = None
    logical_gpus: tuple[int, ...] = ()
    """The config's GPU ids of this instance, in the order they map onto Ray's devices."""


@dataclass(frozen=True)
class GroupRequest:
    """One ``STRICT_PACK`` placement group: the TP ranks of one stage in one replica."""

    key: str
    bundles: tuple[dict[str, float], ...]
    label_selector: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RayPlan:
    actors: tuple[ActorRequest, ...]
    groups: tuple[GroupRequest, ...]

    def actor(self, instance: str) -> ActorRequest:
        for request in self.actors:
            if request.instance == instance:
                return request
        raise KeyError(instance)


def gpu_request(instance: ProcessInstance, cpu_only: bool) -> float:
    """GPUs the instance asks Ray for (whole GPUs it owns, or its declared fraction of a shared one)."""
    if cpu_only or not instance.gpus:
        return 0.0
    shares: dict[int, float] = {}
    owned: set[int] = set()
    for placement in instance.stages:
        if placement.gpu is None:
            continue
        if placement.memory_fraction is None:
            owned.add(placement.gpu)
        else:
            shares[placement.gpu] = shares.get(placement.gpu, 0.0) + placement.memory_fraction
    if len(instance.gpus) == 1 and not owned:
        return round(min(shares[instance.gpus[0]], 1.0), 6)
    return float(len(instance.gpus))  # Ray splits fractions only within one device


def plan(topology: CompiledTopology, cpu_only: bool) -> RayPlan:
    """The actor (and placement group) requests for every instance of the topology."""
    actors: list[ActorRequest] = []
    groups: dict[str, list[dict[str, float]]] = {}
    selectors: dict[str, dict[str, str]] = {}
    for instance in topology.instances:
        process = topology.process(instance.process)
        ray: dict[str, Any] = process.ray or {}
        num_cpus = float(ray.get("num_cpus", 0.0))
        num_gpus = gpu_request(instance, cpu_only)
        resources = {str(k): float(v) for k, v in (ray.get("resources") or {}).items()}
        label_selector = {str(k): str(v) for k, v in (ray.get("label_selector") or {}).items()}
        group = bundle_index = None
        if process.tp_rank is not None:
            group = f"{process.declared_process}@r{instance.replica or 0}"
            bundles = groups.setdefault(group, [])
            bundle_index = len(bundles)
            num_cpus = max(num_cpus, BUNDLE_MIN_CPU)
            bundle = {"CPU": num_cpus, **resources}
            if num_gpus:
                bundle["GPU"] = num_gpus
            bundles.append(bundle)
            selectors[group] = label_selector
        actors.append(ActorRequest(instance.name, num_cpus, num_gpus, resources, label_selector, group, bundle_index, instance.gpus))
    return RayPlan(tuple(actors), tuple(GroupRequest(k, tuple(b), selectors[k]) for k, b in groups.items()))


def logical_gpu_map(logical: tuple[int, ...], assigned: list[str]) -> dict[int, int]:
    """Logical GPU id -> index among the devices Ray made visible to the actor.

    Ray lists the GPUs it assigned (``get_accelerator_ids()["GPU"]``) and sets
    ``CUDA_VISIBLE_DEVICES`` to them in that order, so local index ``i`` is
    ``assigned[i]``. A fractional request gets one device that every logical
    id of the instance then maps to. Raises when Ray assigned fewer devices
    than the instance declares (a mismatch between the plan and the cluster).
    """
    if not logical:
        return {}
    if not assigned:
        raise RuntimeError(f"the instance declares GPUs {list(logical)} but Ray assigned it none")
    if len(assigned) == 1:
        return {gpu: 0 for gpu in logical}
    if len(assigned) < len(logical):
        raise RuntimeError(f"the instance declares GPUs {list(logical)} but Ray assigned only {assigned}")
    return {gpu: index for index, gpu in enumerate(sorted(logical))}


def remap_gpus(topology: CompiledTopology, instance_name: str, gpu_map: dict[int, int]) -> CompiledTopology:
    """The topology with this instance's GPU ids replaced by the actor-local device indexes."""
    if not gpu_map:
        return topology
    from dataclasses import replace

    instances = []
    for instance in topology.instances:
        if instance.name == instance_name:
            stages = tuple(replace(p, gpu=gpu_map.get(p.gpu, p.gpu) if p.gpu is not None else None) for p in instance.stages)
            instance = replace(instance, stages=stages)
        instances.append(instance)
    return replace(topology, instances=tuple(instances))
