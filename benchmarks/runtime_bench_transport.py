"""Benchmark 9(a): cross-process tensor throughput vs an in-process clone.

A sender process (this one) streams float32 tensors of 1 KiB .. 256 MiB to a
spawned receiver process through the real transport: ``Outbox`` ->
ZeroMQ ``ipc://`` -> ``Inbox``, tensors >= 1 MiB via the sender's
``ShmPool`` (budget 1 GiB), smaller ones as inline zero-copy frames. The
receiver decodes every message and touches the data (reads one byte of every
4 KiB page, so every page is really mapped and read in the receiver); after
the last message of a round it replies with that checksum, which the sender
verifies. Throughput = bytes sent / time from the first send to the reply.

The receiver copies the bytes out and releases the segment at once, the
sender reuses it (sender copy + receiver copy), as the runtime does (see
``omni_runtime.transport.shm``).

Baseline: ``torch.clone`` of the same tensor in one process (allocation,
page faults and copy included, as the receiver's copy-out pays them too).
Every side uses one torch thread (``threads=1``, the baseline too): on a
shared 2-core machine, two-thread copies stall on the scheduler and made
every number 10x noisier. Each number is
the best of ``trials`` rounds; a round moves about 512 MiB (at least 4 and
at most 2000 messages).

Run: ``python benchmarks/runtime_bench_transport.py`` (prints the table);
``transport_rows()`` returns the rows for the combined runtime benchmark.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

import torch

from omni_runtime.testing import Inbox, Outbox
from omni_runtime.transport import Codec, RunDir, ShmPool, ShmReader

KiB = 1 << 10
MiB = 1 << 20
SIZES = (KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB, 256 * MiB)
TARGET_FROM = 16 * MiB
TARGET_RATIO = 0.5
PAGE = 4096
MODES = ("copy",)


def _touch(t: torch.Tensor) -> int:
    """Read one byte per page (and the last byte); returns their sum."""
    flat = t.reshape(-1).view(torch.uint8)
    return int(flat[::PAGE].sum().item()) + int(flat[-1].item())


def _receiver(run: dict, threads: int) -> None:
    torch.set_num_threads(threads)
    rd = RunDir.from_dict(run)
    codec = Codec(reader=ShmReader(allowed_prefix=rd.shm_prefix))
    inbox = Inbox(rd.address("bench-recv"), codec=codec)
    out = Outbox(rd.address("bench-send"))
    try:
        out.send({"kind": "ready"})
        while True:
            msg = inbox.recv()
            kind = msg.header["kind"]
            if kind == "stop":
                msg.discard()
                break
            t = msg.payload()
            check = _touch(t)
            del t
            if msg.header["last"]:
                out.send({"kind": "ack", "check": check})
    finally:
        inbox.close()
        out.close(linger=2.0)


def _clone_seconds(src: torch.Tensor, count: int, trials: int) -> float:
    best = float("inf")
    for _ in range(trials + 1):  # first round warms up
        t0 = time.perf_counter()
        for _ in range(count):
            dst = src.clone()
            del dst
        best = min(best, time.perf_counter() - t0)
    return best / count


def _transfer_seconds(out: Outbox, inbox: Inbox, src: torch.Tensor, count: int, trials: int, mode: str) -> float:
    expected = _touch(src)
    best = float("inf")
    for _ in range(trials + 1):  # first round creates and faults the segments
        t0 = time.perf_counter()
        for i in range(count):
            out.send({"kind": "data", "mode": mode, "last": i == count - 1}, src)
        ack = inbox.recv(timeout=300)
        elapsed = time.perf_counter() - t0
        if ack is None or ack.header.get("check") != expected:
            raise RuntimeError(f"receiver did not confirm the data ({ack and ack.header})")
        best = min(best, elapsed)
    return best / count


def transport_rows(sizes=SIZES, trials: int = 3, threads: int = 1) -> list[dict]:
    """Measure every size; rows of ``size, clone_gbs, copy_gbs, copy_ratio, view_gbs, view_ratio``."""
    saved_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    run = RunDir.create()
    pool = ShmPool(run.shm_prefix, budget_bytes=1 << 30, timeout=120)
    codec = Codec(pool=pool, shm_threshold=MiB)
    inbox = Inbox(run.address("bench-send"), codec=codec)
    out = Outbox(run.address("bench-recv"), codec=codec, send_timeout=120)
    proc = mp.get_context("spawn").Process(target=_receiver, args=(run.to_dict(), threads), daemon=True)
    proc.start()
    rows = []
    try:
        ready = inbox.recv(timeout=120)
        if ready is None:
            raise RuntimeError("benchmark receiver did not start")
        for size in sizes:
            src = torch.rand(size // 4)
            count = max(4, min(2000, (512 * MiB) // size))
            clone_s = _clone_seconds(src, count, trials)
            row = {"size": size, "messages": count, "clone_gbs": size / clone_s / 1e9}
            for mode in MODES:
                mode_s = _transfer_seconds(out, inbox, src, count, trials, mode)
                row[f"{mode}_gbs"] = size / mode_s / 1e9
                row[f"{mode}_ratio"] = clone_s / mode_s
                row[f"{mode}_us"] = mode_s * 1e6
            rows.append(row)
            pool.trim()
        out.send({"kind": "stop"})
        proc.join(30)
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        inbox.close()
        out.close(linger=0)
        pool.close()
        run.cleanup()
        torch.set_num_threads(saved_threads)
    return rows


def _fmt_size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n // KiB} KiB"


def format_table(rows: list[dict]) -> str:
    head = f"{'size':>8} {'msgs':>5} {'clone GB/s':>10}"
    for mode in MODES:
        head += f" {mode + ' GB/s':>11} {'ratio':>6}"
    head += f" {'copy us/msg':>12}  target (>= {TARGET_RATIO:.0%} from {_fmt_size(TARGET_FROM)})"
    lines = [head, "-" * len(head)]
    for r in rows:
        line = f"{_fmt_size(r['size']):>8} {r['messages']:>5} {r['clone_gbs']:>10.2f}"
        for mode in MODES:
            line += f" {r[mode + '_gbs']:>11.2f} {r[mode + '_ratio']:>5.0%}"
        line += f" {r['copy_us']:>12.1f}"
        if r["size"] >= TARGET_FROM:
            line += "  " + ", ".join(f"{m} {'ok' if r[m + '_ratio'] >= TARGET_RATIO else 'MISSED'}" for m in MODES)
        lines.append(line)
    lines.append(
        "cross-process (sender process -> receiver process, receiver touches every page) vs in-process torch.clone; "
        f"copy is the default receive mode; torch threads={torch.get_num_threads()}, cpus={os.cpu_count()}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    trials = int(argv[0]) if argv else 3
    rows = transport_rows(trials=trials)
    torch.set_num_threads(1)  # for the footer: the thread count that was measured
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
