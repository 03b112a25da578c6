"""The TP groups of a compiled topology: which process instances form one group, rank by rank.

A TP stage with ``tp_size: N`` runs as N instances (``<process>_tp<rank>``, per replica); those N
are one group, named after the stage instance (``tts_engine``, ``tts_engine@r1``). The launcher
picks one rendezvous per start of a group, the supervisor restarts a group as one unit, and
health shows each group with its ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from omni_compiler.topology import CompiledTopology


@dataclass(frozen=True)
class TPGroupSpec:
    """One TP group: its name (the stage instance), the GPU of each rank, and its instances by rank."""

    name: str
    stage: str
    members: tuple[str, ...]
    gpus: tuple[int | None, ...]

    @property
    def size(self) -> int:
        return len(self.members)

    def rank_of(self, instance: str) -> int:
        return self.members.index(instance)


def tp_groups(topology: CompiledTopology) -> dict[str, TPGroupSpec]:
    """Group name -> spec, for every stage with ``tp_size > 1`` (per replica)."""
    found: dict[str, dict[int, tuple[str, int | None, str]]] = {}
    for inst in topology.instances:
        for placement in inst.stages:
            if placement.tp_rank is not None and placement.tp_size > 1:
                found.setdefault(placement.instance_stage, {})[placement.tp_rank] = (inst.name, placement.gpu, placement.stage)
    groups = {}
    for name, ranks in found.items():
        ordered = [ranks[r] for r in sorted(ranks)]
        groups[name] = TPGroupSpec(name, ordered[0][2], tuple(m for m, _, _ in ordered), tuple(g for _, g, _ in ordered))
    return groups


def group_of_instance(topology: CompiledTopology) -> dict[str, TPGroupSpec]:
    """Instance name -> the TP group it is a rank of (instances outside any group are absent)."""
    return {member: spec for spec in tp_groups(topology).values() for member in spec.members}


def group_health(topology: CompiledTopology, states: dict[str, str]) -> dict[str, dict]:
    """Per TP group: its state (``ready`` only when every rank is) and each rank's instance and state."""
    out = {}
    for name, spec in tp_groups(topology).items():
        ranks = [
            {"rank": r, "instance": member, "state": states.get(member, "starting"), "gpu": spec.gpus[r]}
            for r, member in enumerate(spec.members)
        ]
        found = {rank["state"] for rank in ranks}
        state = "ready" if found == {"ready"} else next((s for s in ("dead", "restarting", "starting", "stopped") if s in found), "degraded")
        out[name] = {"stage": spec.stage, "size": spec.size, "state": state, "ranks": ranks}
    return out
