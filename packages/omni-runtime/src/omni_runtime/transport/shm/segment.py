"""Shared-memory segments: names, layout, and removal of a run's segments.

Why not ``multiprocessing.shared_memory``: its resource tracker unlinks (or
warns about) segments owned by another process and needs a tracker process;
segments here are files under ``/dev/shm`` opened with ``os.open`` + ``mmap``,
so no tracker is involved and ownership is explicit.

Names are ``<run prefix><sender pid>-<seq>``: the run prefix (from
:func:`new_run_prefix`) lets the process that owns the run remove every
segment of it after a crash with :func:`cleanup_run`; the pid says which
sender created it (so the sender of a dead peer's segments is known).

Layout: a 64-byte header ``magic(8) gen(u64) claimed(u64) capacity(u64)``
followed by the data, 64-byte aligned. ``gen`` changes whenever the sender
reuses the segment; ``claimed == gen`` once a receiver has consumed it.
"""

from __future__ import annotations

import mmap
import os
import re
import secrets
import struct
import time
from dataclasses import dataclass

import numpy as np

SHM_DIR = "/dev/shm"
HEADER_BYTES = 64

MAGIC = b"OMNISHM1"
HEADER = struct.Struct("<8sQQQ")  # magic, gen, claimed, capacity
GEN_OFFSET = 8
CLAIM_OFFSET = 16
U64 = struct.Struct("<Q")

NAME_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,200}$")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.@-]{5,100}-$")

MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


def new_run_prefix(tag: str = "omni") -> str:
    """A fresh per-run segment-name prefix such as ``omni-3f9a0c1b-``.

    Pass the same prefix to every process of a run (each pool appends its
    pid), and to :func:`cleanup_run` when the run ends or crashes.
    """
    prefix = f"{tag}-{secrets.token_hex(4)}-"
    validate_prefix(prefix)
    return prefix


def validate_prefix(prefix: str) -> str:
    """Check a run prefix; returns it or raises :class:`ValueError`.

    The rule (5-100 chars of ``[A-Za-z0-9_.@-]`` ending in ``-``) keeps
    names valid in ``/dev/shm`` and makes ``cleanup_run("")``-style accidents
    that would match unrelated segments impossible.
    """
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
        raise ValueError(
            f"shared-memory run prefix {prefix!r} is invalid: it must be 6-101 "
            "characters of letters, digits, '_', '.', '@', '-' and end with '-'; "
            "use omni_runtime.transport.new_run_prefix()"
        )
    return prefix


def cleanup_run(prefix: str, shm_dir: str = SHM_DIR) -> list[str]:
    """Unlink every segment whose name starts with ``prefix``; returns names.

    The parent calls this after its children exited (normally or not), so
    segments of a crashed sender do not outlive the run.
    """
    validate_prefix(prefix)
    removed = []
    try:
        names = os.listdir(shm_dir)
    except FileNotFoundError:
        return removed
    for name in sorted(names):
        if name.startswith(prefix):
            try:
                os.unlink(os.path.join(shm_dir, name))
            except FileNotFoundError:
                continue
            removed.append(name)
    return removed


def remove_sender_segments(prefix: str, pid: int, shm_dir: str = SHM_DIR) -> list[str]:
    """Unlink the segments of one sender process of a run (it died); returns names.

    Receivers that already copied their data out are unaffected; a message
    still in flight from that sender fails to decode with a clear error.
    """
    validate_prefix(prefix)
    mine = f"{prefix}{pid}-"
    removed = []
    try:
        names = os.listdir(shm_dir)
    except FileNotFoundError:
        return removed
    for name in names:
        if name.startswith(mine):
            try:
                os.unlink(os.path.join(shm_dir, name))
            except FileNotFoundError:
                continue
            removed.append(name)
    return removed


@dataclass(frozen=True)
class ShmRef:
    """What travels on the wire for one segment: name, generation, length."""

    name: str
    gen: int
    nbytes: int


def size_class(nbytes: int) -> int:
    """Round a request up so similar sizes reuse one segment (<= 12.5% waste)."""
    page = 4096
    n = max(nbytes, 1)
    step = max(page, 1 << max(n.bit_length() - 4, 0))
    return -(-n // step) * step


def array_over(mm: mmap.mmap, count: int, offset: int) -> np.ndarray:
    """A flat ``uint8`` numpy array over ``mm`` that keeps the mapping alive as long as it lives.

    The array holds a buffer export of ``mm`` (through a memoryview), so
    ``mm.close()`` raises ``BufferError`` while any view of it lives (an encode
    still copying when the pool closes, a torch tensor made with
    ``torch.from_numpy``) instead of unmapping memory under it; the mapping is
    unmapped when the last one is freed. numpy, not torch: the parent process
    reads and writes segments without loading torch.
    """
    return np.frombuffer(memoryview(mm), dtype=np.uint8, count=count, offset=offset)


class Segment:
    """One mapped segment of a sender's pool and its pool-side state."""

    __slots__ = ("capacity", "data", "fd", "gen", "last_used", "mm", "name", "path", "sent_at", "sent_to", "state")

    def __init__(self, name: str, path: str, fd: int, mm: mmap.mmap, capacity: int) -> None:
        self.name = name
        self.path = path
        self.fd = fd
        self.mm = mm
        self.data = array_over(mm, capacity, HEADER_BYTES)
        self.capacity = capacity
        self.gen = 1
        self.state = "free"  # free | leased | sent
        self.sent_at = 0.0
        self.sent_to: str | None = None
        self.last_used = time.monotonic()

    @property
    def footprint(self) -> int:
        return self.capacity + HEADER_BYTES

    def write_gen(self) -> None:
        U64.pack_into(self.mm, GEN_OFFSET, self.gen)
        U64.pack_into(self.mm, CLAIM_OFFSET, 0)

    def claimed(self) -> bool:
        return U64.unpack_from(self.mm, CLAIM_OFFSET)[0] == self.gen

    def destroy(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.data = None
        try:
            self.mm.close()
        except BufferError:
            # A lease view still exists; the mapping is freed with it.
            pass
        try:
            os.close(self.fd)
        except OSError:
            pass


def destroy_all(segments: dict[str, Segment]) -> None:
    for seg in list(segments.values()):
        seg.destroy()
    segments.clear()
