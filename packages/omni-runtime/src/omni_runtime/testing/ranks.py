"""Real rank processes for tensor-parallel tests and benchmarks: spawn them, collect what they report.

``run_ranks`` starts one ``spawn`` process per argument tuple, each calling ``target(*args, out)``
and putting its report (anything picklable between test processes) on ``out``; it returns the
reports that came within ``timeout`` and makes sure no rank outlives the call.
``hold_connection`` tells whether two processes hold the two ends of one established TCP
connection (how a test sees that ranks really formed their group).
"""

from __future__ import annotations

import multiprocessing as mp
import queue
from collections.abc import Callable, Sequence
from typing import Any


def run_ranks(target: Callable[..., None], args: Sequence[tuple], *, timeout: float, expect: int | None = None) -> list[Any]:
    """Run ``target(*a, out)`` for each ``a`` in its own spawned process; the first ``expect`` reports (default: one per process)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, out)) for a in args]
    for p in procs:
        p.start()
    reports = []
    try:
        for _ in range(len(procs) if expect is None else expect):
            reports.append(out.get(timeout=timeout))
    except queue.Empty:
        pass
    for p in procs:
        p.join(timeout=20)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    return reports


def hold_connection(pid_a: int, pid_b: int) -> bool:
    """Whether the two processes hold the two ends of an established TCP connection."""
    import psutil

    ends = {(c.laddr, c.raddr) for c in psutil.Process(pid_a).net_connections("tcp") if c.raddr and c.status == "ESTABLISHED"}
    return any((c.raddr, c.laddr) in ends for c in psutil.Process(pid_b).net_connections("tcp") if c.raddr)
