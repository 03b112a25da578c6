"""Tensor parallelism's process side: the ranks of a TP stage rendezvous into one ``torch.distributed`` group.

:mod:`.rendezvous` forms the group (address and port picked by the launcher, a join timeout that
names the missing ranks), :mod:`.group` is a rank's handle on it (collectives with timeouts, the
process's current group), :mod:`.topology` reads the TP groups of a compiled topology (which
instances form one group, for the launcher, the supervisor and health).
"""

from .group import CollectiveStats, TPGroup, current, form, set_current, single
from .rendezvous import DEFAULT_COLLECTIVE_TIMEOUT_S, DEFAULT_JOIN_TIMEOUT_S, Rendezvous, RendezvousError, backend_for, pick_port
from .topology import TPGroupSpec, tp_groups

__all__ = [
    "DEFAULT_COLLECTIVE_TIMEOUT_S",
    "DEFAULT_JOIN_TIMEOUT_S",
    "CollectiveStats",
    "Rendezvous",
    "RendezvousError",
    "TPGroup",
    "TPGroupSpec",
    "backend_for",
    "current",
    "form",
    "pick_port",
    "set_current",
    "single",
    "tp_groups",
]
