"""Where a stage of a request runs: logical stage -> concrete process instances.

A request is bound at admission to one replica per replicated process group
(``binding``: group -> replica index) and keeps it for its lifetime, so every
stage of that process runs in the same replica. TP ranks of a stage are
separate OS processes forming one group (``omni_runtime.distributed``): only rank 0
receives the payload and chunks (it schedules and sends the other ranks each step's
inputs itself), and only rank 0's output continues down the pipeline.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from omni_compiler.topology import CompiledTopology


@dataclass(frozen=True)
class Target:
    """One concrete destination of a stage: the OS-process instance and the TP rank there."""

    instance: str
    tp_rank: int | None


class Router:
    """Precomputed stage -> instance tables for one topology (parent and workers share it)."""

    def __init__(self, topology: CompiledTopology) -> None:
        self.topology = topology
        self.stages = {s.name: s for s in topology.stages}
        self._group_of: dict[str, str] = {}
        self._replicas: dict[str, int] = {}
        for proc in topology.processes:
            group = proc.replicated_by or proc.name
            self._group_of[proc.name] = group
            self._replicas[group] = max(self._replicas.get(group, 1), proc.num_replicas)
        self._instance: dict[tuple[str, int], str] = {}
        for inst in topology.instances:
            self._instance[(inst.process, inst.replica or 0)] = inst.name
        self._stage_procs: dict[str, list[tuple[str, int | None]]] = {}
        for proc in topology.processes:
            for stage in proc.stages:
                self._stage_procs.setdefault(stage, []).append((proc.name, proc.tp_rank))
        for procs in self._stage_procs.values():
            procs.sort(key=lambda item: item[1] or 0)
        # stream producers per consumer, fan-in sources per stage
        self.stream_producers: dict[str, tuple[str, ...]] = {
            s.name: tuple(p.name for p in topology.stages if s.name in p.stream_to) for s in topology.stages
        }
        self.wait_sources: dict[str, tuple[str, ...]] = {s.name: tuple(s.wait_for) for s in topology.stages}
        self.fan_in_targets: dict[str, tuple[str, ...]] = {
            s.name: tuple(t.name for t in topology.stages if s.name in t.wait_for) for s in topology.stages
        }

    @property
    def replicated_groups(self) -> dict[str, int]:
        """Process groups with more than one replica, and how many."""
        return {g: n for g, n in self._replicas.items() if n > 1}

    def group_instances(self, group: str) -> list[list[str]]:
        """For each replica index of ``group``: the instance names that make up that replica."""
        out: list[list[str]] = [[] for _ in range(self._replicas[group])]
        for (proc, replica), name in self._instance.items():
            if self._group_of[proc] == group:
                out[replica].append(name)
        return out

    def targets(self, stage: str, binding: Mapping[str, int]) -> list[Target]:
        """The instance that runs ``stage`` for a request with ``binding`` (a TP stage's rank 0)."""
        out = []
        for proc, rank in self._stage_procs[stage]:
            if rank:  # ranks above 0 follow rank 0, they take no requests
                continue
            replica = binding.get(self._group_of[proc], 0)
            out.append(Target(self._instance[(proc, replica)], rank))
        return out

    def instances_of_binding(self, binding: Mapping[str, int]) -> set[str]:
        """Every instance a request with ``binding`` may touch."""
        out = set()
        for (proc, replica), name in self._instance.items():
            if replica == binding.get(self._group_of[proc], 0):
                out.add(name)
        return out


class ReplicaChooser:
    """Picks a replica per replicated group at admission: ``round_robin`` (default) or ``least_loaded``."""

    POLICIES = ("round_robin", "least_loaded")

    def __init__(self, router: Router, policy: str = "round_robin") -> None:
        if policy not in self.POLICIES:
            raise ValueError(f"replica_policy must be one of {', '.join(self.POLICIES)}, got {policy!r}")
        self.policy = policy
        self._router = router
        self._groups = router.replicated_groups
        self._members = {g: router.group_instances(g) for g in self._groups}
        self._counters = {g: itertools.count() for g in self._groups}

    def choose(self, load: Mapping[str, int], alive: Mapping[str, bool]) -> dict[str, int] | None:
        """A binding using only live replicas, or None if some group has no live replica."""
        binding: dict[str, int] = {}
        for group, count in self._groups.items():
            live = [i for i in range(count) if all(alive.get(name, False) for name in self._members[group][i])]
            if not live:
                return None
            if self.policy == "round_robin":
                # advance until a live replica comes up, so a dead replica's turn is skipped
                for _ in range(count):
                    idx = next(self._counters[group]) % count
                    if idx in live:
                        break
            else:
                idx = min(live, key=lambda i: (sum(load.get(n, 0) for n in self._members[group][i]), i))
            binding[group] = idx
        return binding

    def can_serve(self, alive: Mapping[str, bool]) -> bool:
        """Whether a request could be bound now: a live replica in every replicated group, every other instance live."""
        replicated = {name for members in self._members.values() for replica in members for name in replica}
        if not all(ok for name, ok in alive.items() if name not in replicated):
            return False
        return all(any(all(alive.get(n, False) for n in replica) for replica in members) for members in self._members.values())

    def group_members(self, group: str) -> list[list[str]]:
        return self._members[group]


def instance_pairs(topology: CompiledTopology, parent: str = "@parent") -> list[tuple[str, str]]:
    """Ordered (sender, receiver) process pairs of a run: stage edges across processes, plus the parent's."""
    hosts: dict[str, list[str]] = {}
    for instance in topology.instances:
        for placement in instance.stages:
            hosts.setdefault(placement.stage, []).append(instance.name)
    pairs: dict[tuple[str, str], None] = {}
    for name in hosts.get(topology.entry_stage, []):
        pairs[(parent, name)] = None
    for edge in topology.edges:
        for src in hosts.get(edge.src, []):
            for dst in hosts.get(edge.dst, []):
                if src != dst:
                    pairs[(src, dst)] = None
    for stage in topology.stages:
        if stage.terminal:
            for name in hosts.get(stage.name, []):
                pairs[(name, parent)] = None
    return list(pairs)
