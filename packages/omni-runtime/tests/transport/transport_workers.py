"""Child-process entry points for the transport tests (imported under spawn).

Each worker talks to the test process only through the transport under
test (plus a plain exit code), so a test observes real cross-process
behaviour: separate interpreters, separate torch, real ``/dev/shm``.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time

import torch

from omni_runtime.testing import Inbox, Outbox
from omni_runtime.transport import Codec, RunDir, ShmPool, ShmReader


def raw_bytes(t: torch.Tensor) -> bytes:
    """The tensor's element bytes in row-major order (what must survive)."""
    flat = t.detach().cpu().contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    return flat.view(torch.uint8).numpy().tobytes()


def digest_tree(value):
    """Replace every tensor by ``[dtype, shape, sha256 of bytes]``; keep the rest."""
    if isinstance(value, torch.Tensor):
        return ["tensor", str(value.dtype), list(value.shape), hashlib.sha256(raw_bytes(value)).hexdigest()]
    if isinstance(value, dict):
        return {k: digest_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [digest_tree(v) for v in value]
    if isinstance(value, tuple):
        return ("tuple", [digest_tree(v) for v in value])
    return value


def echo_worker(run: dict, budget: int, threshold: int) -> None:
    """Serve ``echo`` (reply with the payload and its digests), ``trim``, ``stop``.

    Replies go through the child's own pool, so large tensors cross the
    boundary twice, once in each direction.
    """
    rd = RunDir.from_dict(run)
    pool = ShmPool(rd.shm_prefix, budget_bytes=budget)
    codec = Codec(pool=pool, reader=ShmReader(allowed_prefix=rd.shm_prefix), shm_threshold=threshold)
    inbox = Inbox(rd.address("child"), codec=codec)
    out = Outbox(rd.address("parent"), codec=codec)
    try:
        out.send({"kind": "ready", "pid": os.getpid()})
        while True:
            msg = inbox.recv()
            kind = msg.header["kind"]
            if kind == "stop":
                msg.discard()
                break
            if kind == "echo":
                value = msg.payload()
                out.send({"kind": "echo", "seq": msg.header["seq"]}, {"value": value, "digest": digest_tree(value)})
            elif kind == "trim":
                msg.discard()
                pool.trim()
                out.send({"kind": "trimmed"})
            elif kind == "hold":
                # Keep the message undecoded until "drop", so the sender's
                # segments stay unclaimed and pinned (back-pressure tests).
                held = msg
                out.send({"kind": "holding", "n": msg.shm_count})
                while True:
                    nxt = inbox.recv()
                    if nxt.header["kind"] == "drop":
                        nxt.discard()
                        break
                    nxt.discard()
                held.discard()
                out.send({"kind": "dropped"})
            elif kind == "die":
                # die without claiming the payload's segment
                os.kill(os.getpid(), signal.SIGKILL)
            else:
                msg.discard()
                out.send({"kind": "error", "message": f"unknown kind {kind!r}"})
    finally:
        inbox.close()
        out.close(linger=5.0)
        pool.close()


def crash_sender_worker(run: dict, nbytes: int) -> None:
    """Create segments, send one reference, then SIGKILL itself (no cleanup)."""
    rd = RunDir.from_dict(run)
    pool = ShmPool(rd.shm_prefix, budget_bytes=8 * nbytes + (1 << 20))
    codec = Codec(pool=pool, shm_threshold=1024)
    out = Outbox(rd.address("parent"), codec=codec)
    # Lease first: leasing after the send could reuse the sent segment if the
    # receiver has not locked it yet (a race under load), leaving one orphan, not two.
    _leased = pool.acquire(nbytes)  # a leased-but-unsent segment, held until the kill
    out.send({"kind": "tensor"}, torch.full((nbytes // 4,), 7, dtype=torch.int32))
    out.close(linger=5.0)
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)  # `_leased` is still referenced here


def stream_sender_worker(run: dict, count: int, nbytes: int, budget: int) -> None:
    """Send ``count`` large tensors as fast as back-pressure allows, then ``done``."""
    rd = RunDir.from_dict(run)
    pool = ShmPool(rd.shm_prefix, budget_bytes=budget, timeout=60.0)
    codec = Codec(pool=pool, shm_threshold=1024)
    out = Outbox(rd.address("parent"), codec=codec)
    ack = Inbox(rd.address("child"), codec=codec)
    try:
        for i in range(count):
            t = torch.full((nbytes // 8,), i, dtype=torch.int64)
            out.send({"kind": "chunk", "seq": i}, t)
        out.send({"kind": "done", "allocated": pool.allocated_bytes})
        ack.recv(timeout=60.0)  # keep segments alive until the parent has read them
    finally:
        ack.close()
        out.close(linger=5.0)
        pool.close()
