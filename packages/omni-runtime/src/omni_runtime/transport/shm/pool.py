"""The sender's shared-memory pool: a bounded budget, back-pressure, segment reuse.

A sending process owns one :class:`ShmPool`. The pool keeps segments mapped
and *reuses* them, so steady-state sends write into already-faulted memory
(one copy, straight from the source tensor into the segment, also from CUDA).
Total segment bytes never exceed ``budget_bytes``: when the budget is full,
:meth:`ShmPool.acquire` waits (back-pressure) until a receiver releases a
segment, and raises :class:`ShmTimeoutError` after ``timeout`` seconds.

A receiver releases a segment by claiming it (:mod:`.reader`) under a shared
``flock``; release is a kernel lock and a claim mark, not a message, so a
receiver that crashes (even SIGKILL) releases its segments automatically. A
reference that is never claimed (receiver died before reading, message
dropped) is reclaimed after ``claim_timeout`` seconds, or at once through
:meth:`ShmPool.reclaim_unclaimed` when the runtime observes the peer's death.
Reclaiming bumps the generation, so a late reader gets a clear
:class:`CodecError` instead of someone else's bytes. :meth:`ShmPool.close`
(also run at interpreter exit) unlinks every segment of the pool.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import fcntl
import itertools
import mmap
import os
import threading
import time
import weakref
from typing import Any

from ..errors import ShmBudgetError, ShmError, ShmTimeoutError
from .segment import HEADER, HEADER_BYTES, MAGIC, MAP_FLAGS, SHM_DIR, Segment, ShmRef, destroy_all, size_class, validate_prefix

DEFAULT_BUDGET_BYTES = 1 << 30
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_CLAIM_TIMEOUT_S = 120.0
DEFAULT_IDLE_TTL_S = 60.0


class ShmLease:
    """One acquired segment region, owned by the sender until sent.

    ``array`` is a writable flat ``uint8`` numpy array of ``nbytes`` over the
    segment, ``view`` the same memory as a torch tensor (made on first use;
    ``view.view(dtype).view(shape).copy_(t)`` handles non-contiguous and CUDA
    sources in one copy). Then either :meth:`mark_sent` once the message
    carrying :attr:`ref` was queued, or :meth:`cancel` if it never will be.
    """

    __slots__ = ("_pool", "_seg", "_view", "array", "ref")

    def __init__(self, pool: ShmPool, seg: Segment, nbytes: int) -> None:
        self._pool = pool
        self._seg = seg
        self.ref = ShmRef(seg.name, seg.gen, nbytes)
        self.array: Any = seg.data[:nbytes]
        self._view: Any = None

    @property
    def view(self) -> Any:
        """The segment region as a flat ``uint8`` torch tensor (imports torch; None once sent or cancelled)."""
        if self._view is None and self.array is not None:
            import torch

            self._view = torch.from_numpy(self.array)
        return self._view

    def mark_sent(self, peer: str | None = None) -> None:
        """The reference is on its way (to ``peer``); the receiver's claim/release frees it."""
        self._pool._mark_sent(self._seg, self.ref.gen, peer)
        self.array = self._view = None

    def cancel(self) -> None:
        """Give the segment back unsent (encode or send failed, request aborted)."""
        self._pool._cancel(self._seg, self.ref.gen)
        self.array = self._view = None


class ShmPool:
    """Sender-side segments with a byte budget and back-pressure.

    Thread-safe. One pool per sending process is the intended use (the
    budget is then "per sender"); share it between all outgoing channels of
    that process. ``budget_bytes`` bounds the sum of segment sizes (headers
    included); ``timeout`` bounds how long :meth:`acquire` waits for room;
    ``claim_timeout`` is how long a sent reference may stay unclaimed before
    its segment is reused; free segments idle longer than ``idle_ttl`` are
    unlinked so an idle process does not pin memory.

    Bookkeeping is O(1) per acquire in the steady state: free segments are
    kept per size class (most recently used first, so the next send writes
    into warm pages), sent ones in send order; each acquire checks the
    oldest few sent segments for release (receivers mostly release in
    order), so thousands of in-flight segments cost no per-send scan.
    """

    _POLL_BUSY_LIMIT = 16

    def __init__(
        self,
        prefix: str,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        claim_timeout: float = DEFAULT_CLAIM_TIMEOUT_S,
        idle_ttl: float = DEFAULT_IDLE_TTL_S,
        shm_dir: str = SHM_DIR,
    ) -> None:
        validate_prefix(prefix)
        if budget_bytes <= HEADER_BYTES:
            raise ValueError(f"shared-memory budget_bytes={budget_bytes} must be larger than {HEADER_BYTES}")
        self.prefix = prefix
        self.budget_bytes = int(budget_bytes)
        self.timeout = float(timeout)
        self.claim_timeout = float(claim_timeout)
        self.idle_ttl = float(idle_ttl)
        self.shm_dir = shm_dir
        self._lock = threading.Lock()
        self._segments: dict[str, Segment] = {}
        self._free: dict[int, list[Segment]] = {}  # capacity -> stack (last = most recent)
        self._sent: collections.deque[Segment] = collections.deque()
        self._used = 0
        self._seq = itertools.count()
        self._closed = False
        self._last_expire = time.monotonic()
        self._finalizer = weakref.finalize(self, destroy_all, self._segments)

    # -- public -----------------------------------------------------------------

    @property
    def allocated_bytes(self) -> int:
        """Bytes of all live segments (what the budget bounds)."""
        with self._lock:
            return self._used

    @property
    def busy_segments(self) -> int:
        """Segments leased or sent and not yet released by their receiver."""
        with self._lock:
            self._poll_sent(time.monotonic(), force=False, exhaustive=True)
            return sum(1 for s in self._segments.values() if s.state != "free")

    def segment_names(self) -> list[str]:
        with self._lock:
            return sorted(self._segments)

    def acquire(self, nbytes: int, *, timeout: float | None = None) -> ShmLease:
        """A lease of ``nbytes``; blocks while the budget is full.

        Raises :class:`ShmBudgetError` at once if ``nbytes`` can never fit,
        :class:`ShmTimeoutError` after ``timeout`` (default: the pool's).
        """
        self._check_fits(nbytes)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        delay = 0.0002
        while True:
            lease = self.try_acquire(nbytes)
            if lease is not None:
                return lease
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout_error(nbytes, timeout)
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.005)

    async def acquire_async(self, nbytes: int, *, timeout: float | None = None) -> ShmLease:
        """Like :meth:`acquire`, but waits with ``asyncio.sleep``."""
        self._check_fits(nbytes)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout if timeout is None else timeout)
        delay = 0.0002
        while True:
            lease = self.try_acquire(nbytes)
            if lease is not None:
                return lease
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise self._timeout_error(nbytes, timeout)
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.005)

    def try_acquire(self, nbytes: int) -> ShmLease | None:
        """A lease now, or ``None`` if the budget is full."""
        self._check_fits(nbytes)
        with self._lock:
            if self._closed:
                raise ShmError(f"shared-memory pool {self.prefix!r} is closed")
            now = time.monotonic()
            self._poll_sent(now)
            if now - self._last_expire > min(1.0, self.idle_ttl):
                self._expire_idle(now)
                self._last_expire = now
            seg = self._take_free(nbytes)
            if seg is None:
                seg = self._create(nbytes)
                if seg is None:
                    # Budget full: look past the oldest busy ones before giving up.
                    self._poll_sent(now, exhaustive=True)
                    seg = self._take_free(nbytes) or self._create(nbytes)
                    if seg is None:
                        return None
            seg.state = "leased"
            seg.last_used = now
            return ShmLease(self, seg, nbytes)

    def reclaim_unclaimed(self, peer: str | None = None) -> int:
        """Reuse sent segments nobody claimed (call when a receiver died).

        ``peer``: only what was sent to that receiver (its address, as given
        to :meth:`ShmLease.mark_sent`), so references on their way to live
        receivers stay valid; ``None``: every unclaimed segment. Returns how
        many segments were freed. Safe against a receiver that is reading
        right now: such a segment is locked and stays busy.
        """
        with self._lock:
            return self._poll_sent(time.monotonic(), force=True, exhaustive=True, peer=peer)

    def trim(self) -> int:
        """Unlink every free segment now; returns bytes given back."""
        with self._lock:
            freed = 0
            for seg in [s for s in self._segments.values() if s.state == "free"]:
                freed += seg.footprint
                self._drop(seg)
            return freed

    def close(self) -> None:
        """Unlink every segment of this pool. Idempotent."""
        with self._lock:
            self._closed = True
            self._free.clear()
            self._sent.clear()
            self._used = 0
            destroy_all(self._segments)

    def __enter__(self):  # returns self (typing.Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals (caller holds self._lock) --------------------------------------

    def _check_fits(self, nbytes: int) -> None:
        if not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"shared-memory request of {nbytes!r} bytes: must be an int >= 0")
        if size_class(nbytes) + HEADER_BYTES > self.budget_bytes:
            raise ShmBudgetError(
                f"a tensor of {nbytes} bytes does not fit the shared-memory budget of "
                f"{self.budget_bytes} bytes of pool {self.prefix!r}; raise budget_bytes "
                f"to at least {size_class(nbytes) + HEADER_BYTES} or split the tensor"
            )

    def _timeout_error(self, nbytes: int, timeout: float | None) -> ShmTimeoutError:
        with self._lock:
            busy = sum(s.footprint for s in self._segments.values() if s.state != "free")
        t = self.timeout if timeout is None else timeout
        return ShmTimeoutError(
            f"waited {t:.1f}s for {nbytes} bytes of shared memory: {busy} of the "
            f"{self.budget_bytes}-byte budget of pool {self.prefix!r} is still held by "
            "receivers; the receiver is not draining (slow, stuck, or keeping zero-copy "
            "views); raise budget_bytes or the timeout, or release received tensors sooner"
        )

    def _check_released(self, seg: Segment, now: float, force: bool) -> bool:
        """Whether ``seg`` can be reused now (its generation is then bumped).

        The verdict is taken under an exclusive lock: a receiver holds its
        shared lock from opening the segment until it has finished copying,
        so while we hold the lock no claim is half-done.
        """
        if not (force or seg.claimed() or now - seg.sent_at >= self.claim_timeout):
            return False
        try:
            fcntl.flock(seg.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a receiver still reads it
        try:
            seg.gen += 1  # invalidates any late reference to the old contents
            seg.write_gen()
        finally:
            fcntl.flock(seg.fd, fcntl.LOCK_UN)
        return True

    def _poll_sent(self, now: float, *, force: bool = False, exhaustive: bool = False, peer: str | None = None) -> int:
        """Free released sent segments, oldest first; returns how many (``force``: also unclaimed ones, to ``peer`` if given)."""
        freed = 0
        busy: list[Segment] = []
        while self._sent and (exhaustive or len(busy) < self._POLL_BUSY_LIMIT):
            seg = self._sent.popleft()
            if seg.state != "sent":
                continue
            if self._check_released(seg, now, force and (peer is None or seg.sent_to == peer)):
                self._put_free(seg, now)
                freed += 1
            else:
                busy.append(seg)
        self._sent.extendleft(reversed(busy))
        return freed

    def _put_free(self, seg: Segment, now: float) -> None:
        seg.state = "free"
        seg.last_used = now
        self._free.setdefault(seg.capacity, []).append(seg)

    def _remove_free(self, seg: Segment) -> None:
        stack = self._free.get(seg.capacity)
        if stack is not None and seg in stack:
            stack.remove(seg)
            if not stack:
                del self._free[seg.capacity]

    def _expire_idle(self, now: float) -> None:
        for stack in list(self._free.values()):
            for seg in [s for s in stack if now - s.last_used > self.idle_ttl]:
                self._drop(seg)

    def _take_free(self, nbytes: int) -> Segment | None:
        want = size_class(nbytes)
        stack = self._free.get(want)
        if stack is None:
            caps = [c for c in self._free if c >= nbytes]
            if not caps:
                return None
            cap = min(caps)
            if cap > 2 * want and self._used + want + HEADER_BYTES <= self.budget_bytes:
                # Far too big: create a right-sized one, keep the big one for big tensors.
                return None
            stack = self._free[cap]
        seg = stack.pop()
        if not stack:
            del self._free[seg.capacity]
        return seg

    def _create(self, nbytes: int) -> Segment | None:
        capacity = size_class(nbytes)
        need = capacity + HEADER_BYTES
        if self._used + need > self.budget_bytes:
            free = sorted((s for st in self._free.values() for s in st), key=lambda s: s.last_used)
            if self._used - sum(s.footprint for s in free) + need > self.budget_bytes:
                return None  # evicting every free segment would not make room
            for seg in free:
                if self._used + need <= self.budget_bytes:
                    break
                self._drop(seg)
        name = f"{self.prefix}{os.getpid()}-{next(self._seq)}"
        path = os.path.join(self.shm_dir, name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise ShmError(f"cannot create shared-memory segment {path}: {exc.strerror}; check that {self.shm_dir} exists and is writable") from exc
        try:
            try:
                # Reserve the pages now: writing to an over-committed tmpfs
                # mapping would kill the process with SIGBUS instead.
                os.posix_fallocate(fd, 0, need)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.ENOMEM):
                    raise ShmError(
                        f"{self.shm_dir} is full: cannot reserve {need} bytes for {name}; enlarge it (docker run --shm-size) or lower the shared-memory budget"
                    ) from exc
                os.ftruncate(fd, need)  # filesystems without fallocate
            mm = mmap.mmap(fd, need, flags=MAP_FLAGS)
            HEADER.pack_into(mm, 0, MAGIC, 1, 0, capacity)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            raise
        seg = Segment(name, path, fd, mm, capacity)
        self._segments[name] = seg
        self._used += seg.footprint
        return seg

    def _drop(self, seg: Segment) -> None:
        if self._segments.pop(seg.name, None) is not None:
            self._used -= seg.footprint
        if seg.state == "free":
            self._remove_free(seg)
        seg.destroy()

    def _mark_sent(self, seg: Segment, gen: int, peer: str | None) -> None:
        with self._lock:
            if seg.gen == gen and seg.state == "leased" and seg.name in self._segments:
                seg.state = "sent"
                seg.sent_to = peer
                seg.sent_at = time.monotonic()
                self._sent.append(seg)

    def _cancel(self, seg: Segment, gen: int) -> None:
        with self._lock:
            if seg.gen == gen and seg.state == "leased" and seg.name in self._segments:
                self._put_free(seg, time.monotonic())


