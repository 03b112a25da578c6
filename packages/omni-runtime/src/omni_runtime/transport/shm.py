"""Shared-memory segments for large tensors, with a bounded budget per sender.

Why not ``multiprocessing.shared_memory``: its resource tracker unlinks (or
warns about) segments owned by another process and needs a tracker process;
this module opens POSIX shared memory directly as files under ``/dev/shm``
with ``os.open`` + ``mmap``, so no tracker is involved and ownership is
explicit.

Ownership and lifetimes
-----------------------
* A **sender** process owns one :class:`ShmPool`. Segments are files named
  ``<run prefix><pid>-<seq>``; the run prefix (from :func:`new_run_prefix`)
  lets the parent remove every segment of a run after a crash with
  :func:`cleanup_run`. The pool keeps segments mapped and *reuses* them, so
  steady-state sends write into already-faulted memory (one copy, straight
  from the source tensor into the segment, also from CUDA).
* Total segment bytes of a pool never exceed its ``budget_bytes``. When the
  budget is full, :meth:`ShmPool.acquire` waits (back-pressure) until a
  receiver releases a segment, and raises :class:`ShmTimeoutError` after
  ``timeout`` seconds.
* A **receiver** (:class:`ShmReader`) *claims* a segment reference: it takes
  a shared ``flock`` on the segment file, checks the generation number
  written by the sender, and marks it claimed. A reference can be claimed
  once; a second decode of the same message fails with :class:`CodecError`.
  Three receive modes (``mode=`` of :meth:`ShmReader.read`):

  - ``"copy"`` (the codec's default): the bytes are copied into an
    ordinary tensor and the lock is dropped at once; the sender reuses the
    (warm) segment. One extra copy, no lifetime coupling at all.
  - ``"view"``: a zero-copy view over the (cached) mapping; the claim's lock
    lives as long as any tensor sharing that storage, and the sender's
    budget stays pinned until then. Fastest; for data the receiver drops
    soon (a stage that caches received tensors would pin the budget).
  - ``"adopt"``: the receiver maps the segment,
    unlinks its name and marks it adopted; the returned tensor *is* the
    segment memory (zero copies on the receiving side). The sender drops
    the segment from its pool as soon as it sees the adoption, so its
    budget is free again at once; the memory now belongs to the receiver
    like any tensor it allocated, and the kernel frees it with the last
    view (also when the receiver dies). The sender pays a fresh segment
    per message (no reuse): page allocation plus a page-table setup in
    both processes, which costs more than a copy below ~100 MiB on
    tmpfs without huge pages.

  Because release is a kernel lock or an adoption flag, not a message, a
  receiver that crashes (even SIGKILL) releases its segments automatically.
  A reference that is never claimed (receiver died before reading, message
  dropped) is reclaimed by the sender after ``claim_timeout`` seconds, or at
  once via :meth:`ShmPool.reclaim_unclaimed` when the runtime knows the peer
  is dead. Reclaiming bumps the generation, so a late reader gets a clear
  :class:`CodecError` instead of someone else's bytes.
* :meth:`ShmPool.close` (also run at interpreter exit) unlinks every segment
  of the pool; memory still mapped by a receiver view stays valid until that
  view is freed (POSIX unlink semantics).

Segment layout: a 64-byte header ``magic(8) gen(u64) claimed(u64)
capacity(u64) adopted(u64)`` followed by the data, 64-byte aligned.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import fcntl
import itertools
import mmap
import os
import re
import secrets
import struct
import threading
import time
import weakref
from dataclasses import dataclass

import torch

from .errors import CodecError, ShmBudgetError, ShmError, ShmTimeoutError

SHM_DIR = "/dev/shm"
HEADER_BYTES = 64
DEFAULT_BUDGET_BYTES = 1 << 30
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_CLAIM_TIMEOUT_S = 120.0
DEFAULT_IDLE_TTL_S = 60.0

_MAGIC = b"OMNISHM1"
_HEADER = struct.Struct("<8sQQQ")  # magic, gen, claimed, capacity
_GEN_OFFSET = 8
_CLAIM_OFFSET = 16
_ADOPT_OFFSET = 32
RECEIVE_MODES = ("adopt", "copy", "view")
_U64 = struct.Struct("<Q")

_NAME_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,200}$")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.@-]{5,100}-$")

_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


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
    segments of a crashed sender do not outlive the run. Receivers holding
    zero-copy views keep their memory until they free the views.
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


@dataclass(frozen=True)
class ShmRef:
    """What travels on the wire for one segment: name, generation, length."""

    name: str
    gen: int
    nbytes: int


def _size_class(nbytes: int) -> int:
    """Round a request up so similar sizes reuse one segment (<= 12.5% waste)."""
    page = 4096
    n = max(nbytes, 1)
    step = max(page, 1 << max(n.bit_length() - 4, 0))
    return -(-n // step) * step


def _tensor_over(mm: mmap.mmap, count: int, offset: int) -> torch.Tensor:
    """A flat ``uint8`` tensor over ``mm`` that keeps the mapping alive as long as it lives.

    ``torch.frombuffer`` keeps a reference to the object it is given but holds
    no buffer export, so ``mm.close()`` would unmap the memory under a live
    tensor (a segfault in whichever thread touches it next, e.g. an encode
    still copying when the pool closes). Through a memoryview, ``close()``
    raises ``BufferError`` while any such tensor lives, and the mapping is
    unmapped when the last one is freed.
    """
    return torch.frombuffer(memoryview(mm), dtype=torch.uint8, count=count, offset=offset)


class _Segment:
    __slots__ = ("capacity", "data", "fd", "gen", "last_used", "mm", "name", "path", "sent_at", "state")

    def __init__(self, name: str, path: str, fd: int, mm: mmap.mmap, capacity: int) -> None:
        self.name = name
        self.path = path
        self.fd = fd
        self.mm = mm
        self.data = _tensor_over(mm, capacity, HEADER_BYTES)
        self.capacity = capacity
        self.gen = 1
        self.state = "free"  # free | leased | sent
        self.sent_at = 0.0
        self.last_used = time.monotonic()

    @property
    def footprint(self) -> int:
        return self.capacity + HEADER_BYTES

    def write_gen(self) -> None:
        _U64.pack_into(self.mm, _GEN_OFFSET, self.gen)
        _U64.pack_into(self.mm, _CLAIM_OFFSET, 0)

    def claimed(self) -> bool:
        return _U64.unpack_from(self.mm, _CLAIM_OFFSET)[0] == self.gen

    def adopted(self) -> bool:
        return _U64.unpack_from(self.mm, _ADOPT_OFFSET)[0] == self.gen

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


def _destroy_all(segments: dict) -> None:
    for seg in list(segments.values()):
        seg.destroy()
    segments.clear()


class ShmLease:
    """One acquired segment region, owned by the sender until sent.

    ``view`` is a writable flat ``uint8`` tensor of ``nbytes`` over the
    segment: copy the source into it (``view.view(dtype).view(shape).copy_(t)``
    handles non-contiguous and CUDA sources in one copy). Then either
    :meth:`mark_sent` once the message carrying :attr:`ref` was queued, or
    :meth:`cancel` if it never will be.
    """

    __slots__ = ("_pool", "_seg", "ref", "view")

    def __init__(self, pool: ShmPool, seg: _Segment, nbytes: int) -> None:
        self._pool = pool
        self._seg = seg
        self.ref = ShmRef(seg.name, seg.gen, nbytes)
        self.view = seg.data[:nbytes]

    def mark_sent(self) -> None:
        """The reference is on its way; the receiver's claim/release frees it."""
        self._pool._mark_sent(self._seg, self.ref.gen)
        self.view = None

    def cancel(self) -> None:
        """Give the segment back unsent (encode or send failed, request aborted)."""
        self._pool._cancel(self._seg, self.ref.gen)
        self.view = None


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
        self._segments: dict[str, _Segment] = {}
        self._free: dict[int, list[_Segment]] = {}  # capacity -> stack (last = most recent)
        self._sent: collections.deque[_Segment] = collections.deque()
        self._used = 0
        self._seq = itertools.count()
        self._closed = False
        self._last_expire = time.monotonic()
        self._finalizer = weakref.finalize(self, _destroy_all, self._segments)

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

    def reclaim_unclaimed(self) -> int:
        """Reuse sent segments nobody claimed (call when a receiver died).

        Returns how many segments were freed. Safe against a receiver that
        is reading right now: such a segment is locked and stays busy.
        """
        with self._lock:
            return self._poll_sent(time.monotonic(), force=True, exhaustive=True)

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
            _destroy_all(self._segments)

    def __enter__(self):  # returns self (typing.Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals (caller holds self._lock) --------------------------------------

    def _check_fits(self, nbytes: int) -> None:
        if not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"shared-memory request of {nbytes!r} bytes: must be an int >= 0")
        if _size_class(nbytes) + HEADER_BYTES > self.budget_bytes:
            raise ShmBudgetError(
                f"a tensor of {nbytes} bytes does not fit the shared-memory budget of "
                f"{self.budget_bytes} bytes of pool {self.prefix!r}; raise budget_bytes "
                f"to at least {_size_class(nbytes) + HEADER_BYTES} or split the tensor"
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

    def _check_released(self, seg: _Segment, now: float, force: bool) -> str:
        """``"busy"``, ``"free"`` (reusable, generation bumped) or ``"adopted"``.

        The verdict is taken under an exclusive lock: a receiver holds its
        shared lock from opening the segment until it has finished claiming
        (and, for views, until the view dies), so while we hold the lock no
        claim or adoption is half-done. Checking adoption *after* locking
        matters: a segment whose adopter already freed its tensor is
        unlocked yet must never be reused (its name is gone).
        """
        claimed = seg.claimed()
        if claimed and seg.adopted():
            return "adopted"
        if not (force or claimed or now - seg.sent_at >= self.claim_timeout):
            return "busy"
        try:
            fcntl.flock(seg.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "busy"  # a receiver still reads or views it
        try:
            if seg.claimed() and seg.adopted():
                return "adopted"
            seg.gen += 1  # invalidates any late reference to the old contents
            seg.write_gen()
        finally:
            fcntl.flock(seg.fd, fcntl.LOCK_UN)
        return "free"

    def _poll_sent(self, now: float, *, force: bool = False, exhaustive: bool = False) -> int:
        """Free released sent segments, oldest first; returns how many."""
        freed = 0
        busy: list[_Segment] = []
        while self._sent and (exhaustive or len(busy) < self._POLL_BUSY_LIMIT):
            seg = self._sent.popleft()
            if seg.state != "sent":
                continue
            verdict = self._check_released(seg, now, force)
            if verdict == "adopted":
                # The receiver owns this memory now: forget it, budget freed.
                seg.state = "adopted"
                self._drop(seg)
                freed += 1
            elif verdict == "free":
                self._put_free(seg, now)
                freed += 1
            else:
                busy.append(seg)
        self._sent.extendleft(reversed(busy))
        return freed

    def _put_free(self, seg: _Segment, now: float) -> None:
        seg.state = "free"
        seg.last_used = now
        self._free.setdefault(seg.capacity, []).append(seg)

    def _remove_free(self, seg: _Segment) -> None:
        stack = self._free.get(seg.capacity)
        if stack is not None and seg in stack:
            stack.remove(seg)
            if not stack:
                del self._free[seg.capacity]

    def _expire_idle(self, now: float) -> None:
        for stack in list(self._free.values()):
            for seg in [s for s in stack if now - s.last_used > self.idle_ttl]:
                self._drop(seg)

    def _take_free(self, nbytes: int) -> _Segment | None:
        want = _size_class(nbytes)
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

    def _create(self, nbytes: int) -> _Segment | None:
        capacity = _size_class(nbytes)
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
            mm = mmap.mmap(fd, need, flags=_MAP_FLAGS)
            _HEADER.pack_into(mm, 0, _MAGIC, 1, 0, capacity)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            raise
        seg = _Segment(name, path, fd, mm, capacity)
        self._segments[name] = seg
        self._used += seg.footprint
        return seg

    def _drop(self, seg: _Segment) -> None:
        if self._segments.pop(seg.name, None) is not None:
            self._used -= seg.footprint
        if seg.state == "free":
            self._remove_free(seg)
        seg.destroy()

    def _mark_sent(self, seg: _Segment, gen: int) -> None:
        with self._lock:
            if seg.gen == gen and seg.state == "leased" and seg.name in self._segments:
                seg.state = "sent"
                seg.sent_at = time.monotonic()
                self._sent.append(seg)

    def _cancel(self, seg: _Segment, gen: int) -> None:
        with self._lock:
            if seg.gen == gen and seg.state == "leased" and seg.name in self._segments:
                self._put_free(seg, time.monotonic())


class ShmReader:
    """Receiver side: claims references and turns them into tensors.

    Mappings used with ``mode="copy"`` and ``"view"`` are cached (bounded
    by ``cache_bytes``) because pools reuse segments: a steady stream then
    costs one ``open``/``flock`` per tensor (plus the copy in copy mode), no
    page-table setup. A view holds the claim's locked file descriptor until
    the last tensor sharing its storage is freed. Cached mappings of segments the sender has unlinked are dropped
    on the next sweep. ``allowed_prefix`` restricts which names a peer may
    make this process open.
    """

    def __init__(self, shm_dir: str = SHM_DIR, *, cache_bytes: int = 1 << 30, allowed_prefix: str | None = None) -> None:
        self.shm_dir = shm_dir
        self.cache_bytes = int(cache_bytes)
        self.allowed_prefix = allowed_prefix
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[int, int, mmap.mmap, torch.Tensor]] = {}
        self._last_sweep = time.monotonic()

    def read(self, ref: ShmRef, *, mode: str = "copy") -> torch.Tensor:
        """Claim ``ref`` and return its bytes as a flat ``uint8`` tensor.

        ``mode="copy"``: a private tensor; the segment is released before
        returning. ``"view"``: a zero-copy view; released when the last
        tensor sharing its storage is freed. ``"adopt"``: a zero-copy tensor
        that owns the segment memory; the sender forgets the segment at once.
        """
        if mode not in RECEIVE_MODES:
            raise ValueError(f"shared-memory receive mode {mode!r} is not one of {RECEIVE_MODES}")
        fd, size, ino = self._open_claimed(ref, adopt=mode == "adopt")
        if mode == "view" and ref.nbytes:
            try:
                mm, _ = self._cached(ref.name, size, ino)
                region = memoryview(mm)[HEADER_BYTES : HEADER_BYTES + ref.nbytes]
                out = torch.frombuffer(region, dtype=torch.uint8)
            except BaseException:
                os.close(fd)
                raise
            # torch keeps `region` alive exactly as long as the storage; when
            # the last view dies, closing fd drops the shared lock (release).
            weakref.finalize(region, os.close, fd)
            return out
        try:
            if ref.nbytes == 0:
                return torch.empty(0, dtype=torch.uint8)
            if mode == "adopt":
                # A private mapping of memory nobody else will reuse.
                mm = mmap.mmap(fd, HEADER_BYTES + ref.nbytes, flags=_MAP_FLAGS)
                return torch.frombuffer(mm, dtype=torch.uint8, count=ref.nbytes, offset=HEADER_BYTES)
            out = torch.empty(ref.nbytes, dtype=torch.uint8)
            out.copy_(self._cached(ref.name, size, ino)[1][: ref.nbytes])
            return out
        finally:
            if mode != "view" or not ref.nbytes:
                os.close(fd)

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

    def _open_claimed(self, ref: ShmRef, *, adopt: bool = False) -> tuple[int, int, int]:
        name = ref.name
        if not isinstance(name, str) or not _NAME_RE.match(name) or (self.allowed_prefix is not None and not name.startswith(self.allowed_prefix)):
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
            raw = os.pread(fd, _HEADER.size, 0)
            if len(raw) != _HEADER.size:
                raise CodecError(f"shared-memory segment {path} is truncated")
            magic, gen, claimed, capacity = _HEADER.unpack(raw)
            if magic != _MAGIC:
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
            if adopt:
                # Unlink first: from here on only mappings keep the memory, so
                # no crash can leave this segment behind in /dev/shm.
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
                os.pwrite(fd, _U64.pack(gen), _ADOPT_OFFSET)  # before the claim: the sender reads claim, then adoption
            os.pwrite(fd, _U64.pack(gen), _CLAIM_OFFSET)
        except BaseException:
            os.close(fd)
            raise
        return fd, st.st_size, st.st_ino

    def _cached(self, name: str, size: int, ino: int) -> tuple[mmap.mmap, torch.Tensor]:
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
                mm = mmap.mmap(fd, size, flags=_MAP_FLAGS)
            finally:
                os.close(fd)
            view = _tensor_over(mm, size - HEADER_BYTES, HEADER_BYTES)
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
