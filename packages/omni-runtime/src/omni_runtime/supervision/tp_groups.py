"""A TP group is supervised as one unit: one rank dies, every rank stops, and all restart together.

A rank's process group cannot take a new peer: when one rank is gone, the others' collectives fail
(or would wait for their timeout), so they are stopped at once and the whole group starts again
with a fresh rendezvous, under the restart policy of the stage's process and one restart budget for
the group (rank 0's). Requests in flight fail with ``process_died`` through the usual death path.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..distributed.topology import TPGroupSpec, group_of_instance

if TYPE_CHECKING:
    from .supervisor import Instance, Supervisor

log = logging.getLogger("omni.supervisor")


class GroupRestarts:
    """The supervisor's rule for instances that are ranks of a TP group."""

    def __init__(self, topology: Any) -> None:
        self.groups: dict[str, TPGroupSpec] = group_of_instance(topology)

    def handle_exit(self, sup: Supervisor, inst: Instance, reason: str) -> bool:
        """Called when ``inst`` is down and restarts are enabled; True when the group rule took it."""
        spec = self.groups.get(inst.name)
        if spec is None:
            return False
        from .supervisor import DEAD, RESTARTING

        members = [sup.instances[name] for name in spec.members]
        live = [m for m in members if m.worker is not None]
        if live:
            for member in live:
                if member.state != RESTARTING:
                    log.warning(
                        "process %s (rank %d of TP group %s) is down (%s); stopping rank %d (%s) so the group restarts as one unit",
                        inst.name, spec.rank_of(inst.name), spec.name, reason, spec.rank_of(member.name), member.name,
                    )
                    member.state = RESTARTING
                    member.worker.kill()
            inst.state = RESTARTING
            sup._on_change()
            return True
        lead = members[0]
        delay = lead.budget.take()
        if delay is None:
            for member in members:
                member.state = DEAD
            log.error("TP group %s is down and its restart policy allows no further restart (processes.%s.restart): it stays down",
                      spec.name, sup._process_of(lead.name))
            sup._on_change()
            return True
        sup.stats.restarts[(inst.name, reason)] += 1
        for member in members:
            member.state = RESTARTING
        log.warning("TP group %s: restarting its %d ranks together in %.1f s (restart %d of %d within %g s)",
                    spec.name, spec.size, delay, lead.budget.used, lead.policy.max_restarts, lead.policy.window_s)
        sup._on_change()
        assert sup._loop is not None
        lead.restart_timer = sup._loop.call_later(delay, lambda: sup._loop.create_task(self._restart(sup, members)))
        return True

    async def _restart(self, sup: Supervisor, members: list[Instance]) -> None:
        from .supervisor import DEAD, RESTARTING

        members[0].restart_timer = None
        if sup.stopping or any(m.state != RESTARTING for m in members):
            return
        attempt = max(m.attempt for m in members) + 1
        for member in members:  # rank 0 first: on Ray the others meet on its node
            member.attempt = attempt
            try:
                await sup._launch(member)
            except Exception as exc:  # noqa: BLE001 - a backend that cannot start a rank: the group stays down
                log.error("process %s could not be restarted: %s: %s", member.name, type(exc).__name__, exc)
                member.state = DEAD
                sup._on_change()
            await asyncio.sleep(0)
