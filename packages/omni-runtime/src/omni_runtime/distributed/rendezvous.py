"""Forming one tensor-parallel group: every rank of a TP stage joins one ``torch.distributed`` group.

The parent (local backend) or the Ray launcher (from rank 0's node) picks the address and a free
port once per start of the group (:func:`pick_port`) and hands the same :class:`Rendezvous` to
every rank. Rank 0 hosts a ``TCPStore`` there; each rank writes a ``joined/<rank>`` key, and rank 0
waits for all of them within ``timeout_s``. Waiting on our own keys (instead of the store barrier
inside ``init_process_group``) lets the error say *which* ranks never came: a rank that cannot join
fails start-up with a :class:`RendezvousError` naming the group, its own rank and the missing ones,
well before the parent's ready timeout, instead of hanging.

The process group is then created over that store (gloo on the CPU, NCCL on CUDA) with
``collective_timeout_s``: a collective that waits longer (a lost rank) raises instead of hanging.
"""

from __future__ import annotations

import socket
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

BACKENDS = ("gloo", "nccl")
#: Default seconds a rank waits for the others at start-up (well under the runtime's ready timeout).
DEFAULT_JOIN_TIMEOUT_S = 60.0
#: Default seconds one collective may wait for a peer before it is an error.
DEFAULT_COLLECTIVE_TIMEOUT_S = 60.0


class RendezvousError(RuntimeError):
    """A rank could not form (or lost) its TP group; the message names the group and the rank."""


@dataclass(frozen=True)
class Rendezvous:
    """Where and how one start of a TP group meets: the same value for every rank but ``rank``."""

    group: str
    rank: int
    world_size: int
    host: str
    port: int
    backend: str = "gloo"
    join_timeout_s: float = DEFAULT_JOIN_TIMEOUT_S
    collective_timeout_s: float = DEFAULT_COLLECTIVE_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"TP group {self.group}: backend {self.backend!r} is not one of {', '.join(BACKENDS)}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"TP group {self.group}: rank {self.rank} is outside world size {self.world_size}")

    @property
    def who(self) -> str:
        return f"TP group {self.group} rank {self.rank} of {self.world_size}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rendezvous:
        return cls(**data)


def pick_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now (the OS picks it); rank 0 binds it moments later."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def backend_for(device: str | None) -> str:
    """NCCL for ranks on CUDA, gloo on the CPU."""
    return "nccl" if device is not None and str(device).startswith("cuda") else "gloo"


def _open_store(rdv: Rendezvous) -> Any:
    import torch.distributed as dist

    try:
        return dist.TCPStore(
            rdv.host, rdv.port, rdv.world_size, is_master=rdv.rank == 0,
            timeout=timedelta(seconds=rdv.join_timeout_s), wait_for_workers=False,
        )
    except Exception as exc:  # noqa: BLE001 - reported with the group and rank
        if rdv.rank == 0:
            raise RendezvousError(f"{rdv.who}: could not listen on {rdv.host}:{rdv.port} for the group's store: {exc}") from None
        raise RendezvousError(
            f"{rdv.who}: could not reach rank 0's store at {rdv.host}:{rdv.port} within {rdv.join_timeout_s:g} s "
            f"(rank 0 did not start, or died): {exc}"
        ) from None


def _await_ranks(rdv: Rendezvous, store: Any) -> None:
    """Rank 0: wait until every rank wrote its key; name the ones that never did."""
    keys = [f"joined/{r}" for r in range(rdv.world_size)]
    deadline = time.monotonic() + rdv.join_timeout_s
    while True:
        missing = [r for r, key in enumerate(keys) if not store.check([key])]
        if not missing:
            store.set("all_joined", "1")
            return
        if time.monotonic() >= deadline:
            names = ", ".join(str(r) for r in missing)
            raise RendezvousError(
                f"{rdv.who}: rank(s) {names} did not join at {rdv.host}:{rdv.port} within {rdv.join_timeout_s:g} s; "
                "the group cannot start without every rank (see the missing rank's log for why it did not start)"
            )
        time.sleep(0.05)


def join(rdv: Rendezvous) -> Any:
    """Join the group: returns the ``torch.distributed`` process group of this start of it.

    Raises :class:`RendezvousError` (naming group and rank) when the group does not form within
    ``join_timeout_s``.
    """
    import torch.distributed as dist

    store = _open_store(rdv)
    store.set(f"joined/{rdv.rank}", "1")
    if rdv.rank == 0:
        _await_ranks(rdv, store)
    else:
        try:
            store.wait(["all_joined"], timedelta(seconds=rdv.join_timeout_s))
        except Exception:  # noqa: BLE001 - reported with the group and rank
            raise RendezvousError(
                f"{rdv.who}: the group did not form within {rdv.join_timeout_s:g} s "
                f"(rank 0 at {rdv.host}:{rdv.port} saw some other rank missing, or died)"
            ) from None
    timeout = timedelta(seconds=rdv.collective_timeout_s)
    try:
        if not dist.is_initialized():
            dist.init_process_group(rdv.backend, store=dist.PrefixStore("pg", store), rank=rdv.rank, world_size=rdv.world_size, timeout=timeout)
        return dist.group.WORLD
    except Exception as exc:  # noqa: BLE001 - reported with the group and rank
        raise RendezvousError(f"{rdv.who}: creating the {rdv.backend} process group failed: {type(exc).__name__}: {exc}") from None
