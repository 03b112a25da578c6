"""Where the runtime meets the rendezvous: the parent's book of addresses, the worker's join.

The parent (:class:`RendezvousBook`) picks one address and free port per start of each TP group
(a group restarts as one unit, so every rank of one start asks with the same ``attempt``) and puts
it in the worker's launch (``run["tp"]``). The Ray backend replaces host and port with a free
port on rank 0's node. The worker (:func:`join_for_instance`) joins before it builds any stage,
with gloo or NCCL depending on its device, and makes the group current for the model code.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from omni_compiler.topology import CompiledTopology, ProcessInstance

from .group import TPGroup, form
from .rendezvous import DEFAULT_COLLECTIVE_TIMEOUT_S, DEFAULT_JOIN_TIMEOUT_S, Rendezvous, backend_for, pick_port
from .topology import group_of_instance

RUN_KEY = "tp"
"""The key of the launch's ``run`` dict that carries a rank's rendezvous."""


class RendezvousBook:
    """The parent's choice of address per (TP group, start): the same for every rank of one start."""

    def __init__(self, topology: CompiledTopology, startup_timeout: float, host: str = "127.0.0.1") -> None:
        self.groups = group_of_instance(topology)
        self.host = host
        # a rank that never joins must fail start-up well before the parent's ready timeout
        self.join_timeout_s = min(DEFAULT_JOIN_TIMEOUT_S, max(1.0, startup_timeout / 3))
        self._ports: dict[tuple[str, int], int] = {}

    def for_launch(self, instance: str, attempt: int) -> dict[str, Any]:
        """``{"tp": rendezvous}`` to merge into the instance's launch ``run`` dict, or ``{}``."""
        spec = self.groups.get(instance)
        if spec is None:
            return {}
        key = (spec.name, attempt)
        if key not in self._ports:
            self._ports = {k: v for k, v in self._ports.items() if k[0] != spec.name}  # older starts are done
            self._ports[key] = pick_port(self.host)
        rdv = Rendezvous(spec.name, spec.rank_of(instance), spec.size, self.host, self._ports[key],
                         join_timeout_s=self.join_timeout_s, collective_timeout_s=DEFAULT_COLLECTIVE_TIMEOUT_S)
        return {RUN_KEY: rdv.to_dict()}


def join_for_instance(run: dict[str, Any], instance: ProcessInstance, device: str | None) -> TPGroup | None:
    """Join this instance's TP group (if it is a rank of one) before its stages are built;
    ``device``: the worker's device option (the rank's own device decides gloo or NCCL)."""
    data = run.get(RUN_KEY)
    if not data:
        return None
    from ..worker.factory import resolve_device

    rank_device, _ = resolve_device(instance.stages[0].gpu, device)
    return form(replace(Rendezvous.from_dict(data), backend=backend_for(rank_device)))
