"""Rank bodies the rendezvous tests run in spawned processes (results go back on a queue)."""

from __future__ import annotations

import time
import traceback
from typing import Any

from omni_runtime.distributed import Rendezvous, RendezvousError, form


def collectives(rdv: dict[str, Any], out: Any) -> None:
    """Join, then an all-reduce and a broadcast; report what this rank saw."""
    import torch

    try:
        group = form(Rendezvous.from_dict(rdv))
        x = torch.full((4,), float(group.rank + 1))
        group.all_reduce(x)
        y = torch.arange(3, dtype=torch.float32) if group.rank == 0 else torch.zeros(3)
        group.broadcast(y)
        out.put((group.rank, "ok", x.tolist(), y.tolist()))
        group.leave()
    except Exception:  # noqa: BLE001 - the test reads it
        out.put((rdv["rank"], "error", traceback.format_exc(), None))


def join_only(rdv: dict[str, Any], out: Any) -> None:
    """Try to join; report the error message (or success) and how long it took."""
    start = time.monotonic()
    try:
        form(Rendezvous.from_dict(rdv))
        out.put((rdv["rank"], "ok", time.monotonic() - start))
    except RendezvousError as exc:
        out.put((rdv["rank"], str(exc), time.monotonic() - start))


def lose_peer(rdv: dict[str, Any], out: Any) -> None:
    """Rank 1 exits right after joining; rank 0's next all-reduce must raise, not hang."""
    import os

    import torch

    group = form(Rendezvous.from_dict(rdv))
    if group.rank == 1:
        os._exit(0)
    start = time.monotonic()
    try:
        time.sleep(0.5)
        group.all_reduce(torch.ones(8))
        out.put((0, "no error", time.monotonic() - start))
    except RendezvousError as exc:
        out.put((0, str(exc), time.monotonic() - start))
