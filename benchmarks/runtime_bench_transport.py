"""Cross-process tensor throughput through the runtime's own async data plane.

A sender (this process) streams float32 tensors of 1 KiB .. 256 MiB to a
spawned receiver process through exactly what the runtime's processes use: a
:class:`~omni_runtime.plane.Plane` on each side (``AsyncOutbox.send`` on the
sender's event loop, tensors of 1 MiB and more copied into its shared-memory
pool off the loop; the receiver takes each message from its ``AsyncInbox``
and decodes it with ``Message.payload_async``, large ones off its loop, as a
worker does). The receiver touches the data (one byte of every 4 KiB page, so
every page is really mapped and read) and, after the last message of a round,
replies with that checksum, which the sender verifies. Throughput = bytes sent
/ time from the first send to the reply.

``transport="tcp"`` runs the same through two :class:`NodePlane` ends on
different (pretend) nodes, i.e. ZeroMQ over TCP on 127.0.0.1 with tensors in
4 MiB frames and no shared memory: the cross-node hop of the Ray backend.

Baseline: ``torch.clone`` of the same tensor in one process (allocation, page
faults and copy included, as the receiver's copy-out pays them too). Every
side uses one torch thread (the baseline too): on a shared 2-core machine,
two-thread copies stall on the scheduler. Each number is the best of
``trials`` rounds; a round moves about 512 MiB (4 to 2000 messages).

Run: ``python benchmarks/runtime_bench_transport.py [trials] [ipc|tcp]``;
``transport_rows()`` returns the rows for runtime_bench.py and ray_bench.py.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import sys
import time
from typing import Any

import torch

from omni_runtime.plane import Plane
from omni_runtime.transport import RunDir

KiB = 1 << 10
MiB = 1 << 20
SIZES = (KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB, 256 * MiB)
TARGET_FROM = 16 * MiB
TARGET_RATIO = 0.5
PAGE = 4096
MODES = ("copy",)
"""The receiver copies out of shared memory and releases the segment (the runtime's only mode)."""
SENDER, RECEIVER = "bench-send", "bench-recv"


def _touch(t: torch.Tensor) -> int:
    """Read one byte per page (and the last byte); returns their sum."""
    flat = t.reshape(-1).view(torch.uint8)
    return int(flat[::PAGE].sum().item()) + int(flat[-1].item())


def _plane(run: RunDir, me: str, transport: str, peers: dict[str, Any] | None = None) -> Plane:
    if transport == "tcp":  # two pretend nodes: the sender on one, the receiver on the other
        from omni_runtime.raycluster.dataplane import NodePlane

        return NodePlane(run, me, {"id": me, "host": "127.0.0.1"}, peers, shm_budget_bytes=1 << 30, send_timeout=300)
    return Plane(run, me, shm_budget_bytes=1 << 30, send_timeout=300)


def _receiver(run: dict, threads: int, transport: str, sender_endpoint: dict | None) -> None:
    torch.set_num_threads(threads)
    asyncio.run(_receive(RunDir.from_dict(run), transport, sender_endpoint))


async def _receive(run: RunDir, transport: str, sender_endpoint: dict | None) -> None:
    plane = _plane(run, RECEIVER, transport, {SENDER: sender_endpoint} if sender_endpoint else None)
    out = plane.outbox(SENDER)
    try:
        endpoint = plane.endpoint() if hasattr(plane, "endpoint") else None
        await out.send({"k": "ready"}, endpoint)
        while True:
            for msg in await plane.inbox.recv_batch():
                if msg.header["k"] == "stop":
                    msg.discard()
                    return
                t = await msg.payload_async()
                check = _touch(t)
                del t
                if msg.header["last"]:
                    await out.send({"k": "ack", "check": check})
    finally:
        plane.close()


def _clone_seconds(src: torch.Tensor, count: int, trials: int) -> float:
    best = float("inf")
    for _ in range(trials + 1):  # first round warms up
        t0 = time.perf_counter()
        for _ in range(count):
            dst = src.clone()
            del dst
        best = min(best, time.perf_counter() - t0)
    return best / count


async def _transfer_seconds(plane: Plane, src: torch.Tensor, count: int, trials: int) -> float:
    expected = _touch(src)
    out = plane.outbox(RECEIVER)
    best = float("inf")
    for _ in range(trials + 1):  # first round creates and faults the segments
        t0 = time.perf_counter()
        for i in range(count):
            await out.send({"k": "data", "last": i == count - 1}, src)
        ack = await plane.inbox.recv(timeout=300)
        elapsed = time.perf_counter() - t0
        if ack is None or ack.header.get("check") != expected:
            raise RuntimeError(f"receiver did not confirm the data ({ack and ack.header})")
        best = min(best, elapsed)
    return best / count


async def _rows(sizes: tuple[int, ...], trials: int, threads: int, transport: str) -> list[dict]:
    run = RunDir.create()
    plane = _plane(run, SENDER, transport)
    endpoint = plane.endpoint() if hasattr(plane, "endpoint") else None
    proc = mp.get_context("spawn").Process(target=_receiver, args=(run.to_dict(), threads, transport, endpoint), daemon=True)
    proc.start()
    rows = []
    try:
        ready = await plane.inbox.recv(timeout=120)
        if ready is None:
            raise RuntimeError("benchmark receiver did not start")
        peer = ready.payload()
        if peer:
            plane.learn({RECEIVER: peer})
        for size in sizes:
            src = torch.rand(size // 4)
            count = max(4, min(2000, (512 * MiB) // size))
            clone_s = _clone_seconds(src, count, trials)
            copy_s = await _transfer_seconds(plane, src, count, trials)
            rows.append({
                "size": size, "messages": count, "clone_gbs": size / clone_s / 1e9,
                "copy_gbs": size / copy_s / 1e9, "copy_ratio": clone_s / copy_s, "copy_us": copy_s * 1e6,
            })
            plane.pool.trim()
        await plane.outbox(RECEIVER).send({"k": "stop"})
        await asyncio.get_running_loop().run_in_executor(None, proc.join, 30)
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        plane.close()
        run.cleanup()
    return rows


def transport_rows(sizes: tuple[int, ...] = SIZES, trials: int = 3, threads: int = 1, transport: str = "ipc") -> list[dict]:
    """Measure every size; rows of ``size, messages, clone_gbs, copy_gbs, copy_ratio, copy_us``."""
    saved_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return asyncio.run(_rows(tuple(sizes), trials, threads, transport))
    finally:
        torch.set_num_threads(saved_threads)


def _fmt_size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n // KiB} KiB"


def format_table(rows: list[dict], transport: str = "ipc") -> str:
    head = f"{'size':>8} {'msgs':>5} {'clone GB/s':>10} {transport + ' GB/s':>11} {'ratio':>6} {'us/msg':>10}  target (>= {TARGET_RATIO:.0%} from {_fmt_size(TARGET_FROM)})"
    lines = [head, "-" * len(head)]
    for r in rows:
        line = f"{_fmt_size(r['size']):>8} {r['messages']:>5} {r['clone_gbs']:>10.2f} {r['copy_gbs']:>11.2f} {r['copy_ratio']:>5.0%} {r['copy_us']:>10.1f}"
        if r["size"] >= TARGET_FROM:
            line += "  " + ("ok" if r["copy_ratio"] >= TARGET_RATIO else "MISSED")
        lines.append(line)
    lines.append(
        "sender Plane -> receiver Plane in another process (AsyncOutbox.send / AsyncInbox + payload_async, receiver touches every page) "
        f"vs in-process torch.clone; torch threads=1, cpus={os.cpu_count()}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    trials = int(argv[0]) if argv else 3
    transport = argv[1] if len(argv) > 1 else "ipc"
    print(format_table(transport_rows(trials=trials, transport=transport), transport))
    return 0


if __name__ == "__main__":
    sys.exit(main())
