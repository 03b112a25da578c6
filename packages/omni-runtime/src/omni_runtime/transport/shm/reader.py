"""The receiver side of shared memory: claim a reference, copy its bytes out, release.

A receiver *claims* a segment reference: it takes a shared ``flock`` on the
segment file, checks the generation number the sender wrote, copies the
bytes into an ordinary array, marks the generation claimed and drops the
lock, all before returning. The sender then reuses the (warm) segment. A
reference can be claimed once; a second decode of the same message fails
with :class:`CodecError`. There is no lifetime coupling at all between the
received tensor and the segment.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import threading
import time
from typing import Any

import numpy as np

from ..errors import CodecError
from .segment import CLAIM_OFFSET, HEADER, HEADER_BYTES, MAGIC, MAP_FLAGS, NAME_RE, SHM_DIR, U64, ShmRef, array_over


class ShmReader:
    """Receiver side: claims references and turns them into tensors.

    Mappings are cached (bounded by ``cache_bytes``) because pools reuse
    segments: a steady stream then costs one ``open``/``flock`` and the copy
    per tensor, no page-table setup. Cached mappings of segments the sender
    has unlinked are dropped on the next sweep. ``allowed_prefix`` restricts
    which names a peer may make this process open.
    """

    def __init__(self, shm_dir: str = SHM_DIR, *, cache_bytes: int = 1 << 30, allowed_prefix: str | None = None) -> None:
        self.shm_dir = shm_dir
        self.cache_bytes = int(cache_bytes)
        self.allowed_prefix = allowed_prefix
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[int, int, mmap.mmap, np.ndarray]] = {}
        self._last_sweep = time.monotonic()

    def read_array(self, ref: ShmRef) -> np.ndarray:
        """Claim ``ref`` and return a private copy of its bytes as a flat ``uint8`` numpy array (what the codec uses)."""
        fd, size, ino = self._open_claimed(ref)
        try:
            out = np.empty(ref.nbytes, dtype=np.uint8)
            if ref.nbytes:
                out[:] = self._cached(ref.name, size, ino)[1][: ref.nbytes]
            return out
        finally:
            os.close(fd)

    def read(self, ref: ShmRef) -> Any:
        """:meth:`read_array` as a flat ``uint8`` torch tensor (imports torch)."""
        import torch

        return torch.from_numpy(self.read_array(ref))

    def release(self, ref: ShmRef) -> None:
        """Claim and release ``ref`` without reading (dropped message)."""
        try:
            fd, _, _ = self._open_claimed(ref)
        except CodecError:
            return  # gone, stale or already consumed: nothing left to release
        os.close(fd)

    def close(self) -> None:
        """Drop cached mappings."""
        with self._lock:
            for key in list(self._cache):
                self._evict(key)

    # -- internals -----------------------------------------------------------------

    def _open_claimed(self, ref: ShmRef) -> tuple[int, int, int]:
        name = ref.name
        if not isinstance(name, str) or not NAME_RE.match(name) or (self.allowed_prefix is not None and not name.startswith(self.allowed_prefix)):
            raise CodecError(f"invalid shared-memory segment name {name!r} in message")
        if not isinstance(ref.nbytes, int) or ref.nbytes < 0 or not isinstance(ref.gen, int):
            raise CodecError(f"invalid shared-memory reference {ref!r} in message")
        path = os.path.join(self.shm_dir, name)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            raise CodecError(
                f"shared-memory segment {path} does not exist: the sender closed its pool or the run was cleaned up before this message was read"
            ) from None
        except OSError as exc:
            raise CodecError(f"cannot open shared-memory segment {path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            st = os.fstat(fd)
            raw = os.pread(fd, HEADER.size, 0)
            if len(raw) != HEADER.size:
                raise CodecError(f"shared-memory segment {path} is truncated")
            magic, gen, claimed, capacity = HEADER.unpack(raw)
            if magic != MAGIC:
                raise CodecError(f"{path} is not an omni shared-memory segment (bad magic)")
            if ref.nbytes > capacity or HEADER_BYTES + ref.nbytes > st.st_size:
                raise CodecError(f"shared-memory reference to {ref.nbytes} bytes exceeds segment {name} of {capacity} bytes")
            if gen != ref.gen:
                raise CodecError(
                    f"shared-memory segment {name} was reclaimed by its sender (generation "
                    f"{gen}, message has {ref.gen}): the message was already decoded once, or read after "
                    "the sender's claim timeout"
                )
            if claimed == gen:
                raise CodecError(f"shared-memory segment {name} generation {gen} was already consumed: a message carrying shared memory can be decoded once")
            os.pwrite(fd, U64.pack(gen), CLAIM_OFFSET)
        except BaseException:
            os.close(fd)
            raise
        return fd, st.st_size, st.st_ino

    def _cached(self, name: str, size: int, ino: int) -> tuple[mmap.mmap, np.ndarray]:
        with self._lock:
            now = time.monotonic()
            if now - self._last_sweep > 1.0:
                self._sweep()
                self._last_sweep = now
            hit = self._cache.pop(name, None)
            if hit is not None and hit[0] == ino and hit[1] == size:
                self._cache[name] = hit  # most recently used last
                return hit[2], hit[3]
            if hit is not None:
                self._cache[name] = hit
                self._evict(name)
            # A separate open: the cached mapping must not carry the claim lock.
            fd = os.open(os.path.join(self.shm_dir, name), os.O_RDWR)
            try:
                mm = mmap.mmap(fd, size, flags=MAP_FLAGS)
            finally:
                os.close(fd)
            view = array_over(mm, size - HEADER_BYTES, HEADER_BYTES)
            self._cache[name] = (ino, size, mm, view)
            total = sum(v[1] for v in self._cache.values())
            for key in list(self._cache):
                if total <= self.cache_bytes or key == name:
                    break
                total -= self._cache[key][1]
                self._evict(key)
            return mm, view

    def _sweep(self) -> None:
        for name, (ino, _size, _mm, _view) in list(self._cache.items()):
            try:
                alive = os.stat(os.path.join(self.shm_dir, name)).st_ino == ino
            except FileNotFoundError:
                alive = False
            if not alive:
                self._evict(name)

    def _evict(self, name: str) -> None:
        _ino, _size, mm, view = self._cache.pop(name)
        del view
        try:
            mm.close()
        except BufferError:
            pass  # a copy is in flight on another thread; freed with its view
