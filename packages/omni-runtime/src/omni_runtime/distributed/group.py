"""The TP group a worker process belongs to: rank, size, collectives with timeouts, and errors that name both.

A TP stage owns its processes (one per rank, ``<process>_tp<rank>``), so a process is in at most one
TP group: :func:`current` is that group (set once by the worker before it builds its stages), and
model code asks for it instead of every factory having to take it as an argument.

Collectives raise :class:`~omni_runtime.distributed.rendezvous.RendezvousError` naming the group and
rank when a peer is gone or the collective's timeout passes; after that the group is broken for good
(``broken``): the supervisor restarts every rank together, nobody tries to repair it in place.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .rendezvous import Rendezvous, RendezvousError


@dataclass
class CollectiveStats:
    """Time spent in collectives (for ``benchmarks/tp_bench.py``): counts and seconds per kind."""

    all_reduce_calls: int = 0
    all_reduce_s: float = 0.0
    broadcast_calls: int = 0
    broadcast_s: float = 0.0

    def reset(self) -> None:
        self.all_reduce_calls = self.broadcast_calls = 0
        self.all_reduce_s = self.broadcast_s = 0.0


@dataclass
class TPGroup:
    """One rank's view of its group. ``size == 1`` needs no ``torch.distributed`` at all."""

    name: str
    rank: int
    size: int
    backend: str = "gloo"
    process_group: Any = None
    rendezvous: Rendezvous | None = None
    stats: CollectiveStats = field(default_factory=CollectiveStats)
    broken: str | None = None

    @property
    def who(self) -> str:
        return f"TP group {self.name} rank {self.rank} of {self.size}"

    @property
    def is_leader(self) -> bool:
        return self.rank == 0

    def _failed(self, what: str, exc: BaseException) -> RendezvousError:
        self.broken = f"{what} failed: {type(exc).__name__}: {exc}"
        return RendezvousError(f"{self.who}: {self.broken} (a rank died or stalled; the group restarts as one unit)")

    def _check(self) -> None:
        if self.broken:
            raise RendezvousError(f"{self.who}: the group is broken ({self.broken})")

    def all_reduce(self, tensor: Any) -> Any:
        """Sum ``tensor`` over the ranks, in place (every rank gets the same bits)."""
        if self.size == 1:
            return tensor
        import torch.distributed as dist

        self._check()
        start = time.perf_counter()
        try:
            dist.all_reduce(tensor, group=self.process_group)
        except Exception as exc:  # noqa: BLE001 - named and re-raised
            raise self._failed("all_reduce", exc) from None
        self.stats.all_reduce_calls += 1
        self.stats.all_reduce_s += time.perf_counter() - start
        return tensor

    def broadcast(self, tensor: Any, src: int = 0) -> Any:
        """Rank ``src``'s ``tensor`` into every rank's ``tensor`` (same shape and dtype), in place."""
        if self.size == 1:
            return tensor
        import torch.distributed as dist

        self._check()
        start = time.perf_counter()
        try:
            dist.broadcast(tensor, src=src, group=self.process_group)
        except Exception as exc:  # noqa: BLE001 - named and re-raised
            raise self._failed("broadcast", exc) from None
        self.stats.broadcast_calls += 1
        self.stats.broadcast_s += time.perf_counter() - start
        return tensor

    def leave(self) -> None:
        """Destroy the process group (a clean stop; a broken group is left for the process exit)."""
        if self.size == 1 or self.process_group is None or self.broken:
            return
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        self.process_group = None


_current: TPGroup | None = None
_lock = threading.Lock()


def current() -> TPGroup | None:
    """This process's TP group, or None when it runs no TP stage."""
    return _current


def set_current(group: TPGroup | None) -> None:
    global _current
    with _lock:
        _current = group


def form(rdv: Rendezvous) -> TPGroup:
    """Join ``rdv``'s group (see :func:`~omni_runtime.distributed.rendezvous.join`) and make it current."""
    from .rendezvous import join

    pg = join(rdv)
    group = TPGroup(rdv.group, rdv.rank, rdv.world_size, rdv.backend, pg, rdv)
    set_current(group)
    return group


def single(name: str = "-") -> TPGroup:
    """A group of one (TP=1): collectives are no-ops."""
    return TPGroup(name, 0, 1)
