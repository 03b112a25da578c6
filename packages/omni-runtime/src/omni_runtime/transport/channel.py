"""ZeroMQ ``ipc://`` channels: one inbox per process, one outbox per peer.

The building block for both planes of the runtime:

* every process (parent and each child instance) binds an **inbox**
  (``PULL``) at ``run_dir.address(<instance name>)`` (or several, e.g.
  ``"<name>.ctl"`` and ``"<name>.data"`` so control is never stuck behind
  bulk data);
* a process that talks to a peer connects an **outbox** (``PUSH``) to the
  peer's inbox. Messages from one outbox arrive in order.

A message is ``header`` (a small dict of plain values: message kind,
request id, stage, sequence number, ... as the runtime defines) plus an
optional ``payload`` encoded by :class:`~omni_runtime.transport.codec.Codec`
(tensors zero-copy inline, large ones through shared memory). Wire:
multipart ``[envelope, body, *buffers]``. The receiver decodes the header
immediately (routing, abort checks) and the payload only on demand:
:meth:`Message.payload` (or ``await msg.payload_async()``), or
:meth:`Message.discard` for a dropped message, which releases its shared
memory right away. Control messages (ready / failed / heartbeat / abort /
done signals) are simply messages without a payload.

Shared-memory release path: a receiver claims and releases segments with a
kernel file lock when it decodes or discards (see :mod:`.shm`), so there is
no ack message to lose; a receiver that dies releases everything. Each
process owns one :class:`~omni_runtime.transport.shm.ShmPool` for sending
and passes the same :class:`Codec` to all its outboxes.

Socket settings: outboxes set ``ZMQ_IMMEDIATE`` (a send waits for a live
connection instead of queueing to nowhere), a send high-water mark and a
linger; inboxes set a receive high-water mark and ``ZMQ_MAXMSGSIZE`` (a peer
sending an oversized frame is disconnected by ZeroMQ). Sync sockets are
guarded by a lock so worker threads may share an outbox; async ones belong
to one event loop: they are plain sockets used with ``NOBLOCK`` that wait on
the loop through ``ZMQ_FD`` only when they cannot go on (no ``zmq.asyncio``
Future per message), and :meth:`AsyncInbox.recv_batch` takes every queued
message in one call.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zmq

from .codec import Codec, CodecError, decode_envelope, encode_envelope
from .errors import ChannelClosedError, ChannelError, ChannelTimeoutError
from .shm import cleanup_run, new_run_prefix, validate_prefix

__all__ = ["AsyncInbox", "AsyncOutbox", "Inbox", "Message", "Outbox", "RunDir"]

_ENDPOINT_NAME_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
_MAX_IPC_PATH = 107  # sun_path limit on Linux, minus the terminating NUL
DEFAULT_SNDHWM = 64
DEFAULT_RCVHWM = 64
DEFAULT_LINGER_S = 1.0
DEFAULT_SEND_TIMEOUT_S = 30.0
DEFAULT_MAX_FRAME_BYTES = 1 << 31
_ASYNC_DECODE_BYTES = 4 << 20


@dataclass(frozen=True)
class RunDir:
    """The per-run IPC directory and shared-memory prefix.

    The parent creates it (:meth:`create`), passes ``path`` and
    ``shm_prefix`` to each child (plain strings; :meth:`to_dict` /
    :meth:`from_dict`), and calls :meth:`cleanup` once the children are gone
    (normal exit, error or crash) to remove the socket files and every
    shared-memory segment of the run.
    """

    path: str
    shm_prefix: str

    @classmethod
    def create(cls, base: str | None = None) -> RunDir:
        path = tempfile.mkdtemp(prefix="omni-run-", dir=base)
        os.chmod(path, 0o700)
        return cls(path, new_run_prefix())

    def address(self, name: str) -> str:
        """``ipc://`` address of the endpoint ``name`` (e.g. ``"vocoder@r1"``)."""
        if not _ENDPOINT_NAME_RE.match(name):
            raise ValueError(f"endpoint name {name!r} is invalid: use 1-64 characters of letters, digits, '_', '.', '@', '-'")
        path = os.path.join(self.path, f"{name}.sock")
        if len(path.encode()) > _MAX_IPC_PATH:
            raise ValueError(
                f"IPC socket path {path} is {len(path.encode())} bytes, over the {_MAX_IPC_PATH}-byte "
                "Unix socket limit; use a shorter base directory (e.g. TMPDIR=/tmp) or endpoint name"
            )
        return f"ipc://{path}"

    def cleanup(self) -> list[str]:
        """Remove the directory and unlink the run's segments; returns segment names."""
        shutil.rmtree(self.path, ignore_errors=True)
        return cleanup_run(self.shm_prefix)

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "shm_prefix": self.shm_prefix}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> RunDir:
        return cls(str(data["path"]), validate_prefix(str(data["shm_prefix"])))


class Message:
    """A received message: decoded ``header`` and lazily decoded payload.

    At most one of :meth:`payload` / :meth:`payload_async` /
    :meth:`discard` should be called for a message whose ``shm_count`` is
    non-zero; ``discard`` is idempotent and a no-op after decoding.
    """

    __slots__ = ("_codec", "_state", "frames", "header", "shm_count")

    def __init__(self, header: dict[str, Any], frames: list[Any], shm_count: int, codec: Codec) -> None:
        self.header = header
        self.frames = frames
        self.shm_count = shm_count
        self._codec = codec
        self._state = "new"  # new | decoded | discarded

    @property
    def nbytes(self) -> int:
        """Payload bytes that came over the socket (not counting shared memory)."""
        return sum(_frame_len(f) for f in self.frames)

    def payload(self, *, device: Any = None, shm_mode: str | None = None) -> Any:
        """Decode and return the payload, once; see :meth:`Codec.decode`.

        The message keeps no reference to the result (a zero-copy view must
        not be pinned by a forgotten ``Message``), so a second call raises
        :class:`CodecError`.
        """
        if self._state != "new":
            raise CodecError(f"message payload was already {self._state}; decode it once")
        frames, self.frames = self.frames, []
        self._state = "decoded"
        return self._codec.decode(frames, device=device, shm_mode=shm_mode)

    @property
    def decodes_off_loop(self) -> bool:
        """Whether :meth:`payload_async` decodes in a worker thread (shared memory, or a lot of bytes to copy)."""
        return self._state == "new" and bool(self.shm_count or self.nbytes >= _ASYNC_DECODE_BYTES)

    async def payload_async(self, *, device: Any = None, shm_mode: str | None = None) -> Any:
        """:meth:`payload`, off the event loop when it copies a lot of data."""
        if self.decodes_off_loop:
            loop = asyncio.get_running_loop()
            call = functools.partial(self.payload, device=device, shm_mode=shm_mode)
            return await loop.run_in_executor(_executor("decode"), call)
        return self.payload(device=device, shm_mode=shm_mode)

    def discard(self) -> None:
        """Drop the payload undecoded, releasing its shared memory now."""
        if self._state != "new":
            return
        self._state = "discarded"
        frames, self.frames = self.frames, []
        if self.shm_count:
            self._codec.discard(frames)

    def __repr__(self) -> str:
        return f"Message(header={self.header!r}, shm_count={self.shm_count}, state={self._state})"


_EXECUTORS: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
_EXECUTORS_LOCK = threading.Lock()


def _executor(kind: str) -> concurrent.futures.ThreadPoolExecutor:
    """Separate thread pools for encodes and decodes.

    An encode may block on the shared-memory budget until some receiver
    decodes; if decodes queued behind blocked encodes in one shared pool, two
    processes sending large tensors to each other could wait on each other
    until the timeout. Decodes never wait on a budget, so their own pool
    always makes progress.
    """
    with _EXECUTORS_LOCK:
        ex = _EXECUTORS.get(kind)
        if ex is None:
            ex = _EXECUTORS[kind] = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix=f"omni-{kind}")
        return ex


def _release_result(fut: asyncio.Future[Any]) -> None:
    # An encode that finished after its sender was cancelled: give back its leases.
    if not fut.cancelled() and fut.exception() is None:
        fut.result().release()


def _frame_len(f: Any) -> int:
    if isinstance(f, (bytes, bytearray)):
        return len(f)
    if isinstance(f, memoryview):
        return f.nbytes
    return memoryview(f).nbytes


def _to_message(frames: list[Any], codec: Codec) -> Message:
    if len(frames) < 2:
        # Nothing to release: without a body there are no segment references.
        raise CodecError(f"malformed message: {len(frames)} frame(s), expected envelope + payload")
    try:
        header, shm_count = decode_envelope(frames[0])
    except CodecError:
        codec.discard(frames[1:])
        raise
    return Message(header, frames[1:], shm_count, codec)


class _Base:
    def __init__(self, sock: zmq.Socket, address: str, codec: Codec | None) -> None:
        self._sock = sock
        self.address = address
        self.codec = codec if codec is not None else Codec()
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise ChannelClosedError(f"channel {self.address} is closed")

    @property
    def socket(self) -> zmq.Socket:
        """The ZeroMQ socket, e.g. to bind an inbox on a second endpoint (TCP besides ipc://)."""
        return self._sock

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, linger: float | None = None) -> None:
        """Close the socket (idempotent). ``linger``: seconds to flush queued sends."""
        if self._closed:
            return
        self._closed = True
        self._sock.close(linger=None if linger is None else int(linger * 1000))

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _make_pull(ctx: zmq.Context, address: str, rcvhwm: int, max_frame_bytes: int, socket_class: Any = None) -> zmq.Socket:
    sock = ctx.socket(zmq.PULL, socket_class=socket_class)
    sock.setsockopt(zmq.RCVHWM, rcvhwm)
    sock.setsockopt(zmq.MAXMSGSIZE, max_frame_bytes)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.bind(address)
    except zmq.ZMQError as exc:
        sock.close(linger=0)
        raise ChannelError(f"cannot bind {address}: {exc}; is another process using this run directory?") from exc
    return sock


def _make_push(ctx: zmq.Context, address: str, sndhwm: int, linger_s: float, socket_class: Any = None) -> zmq.Socket:
    sock = ctx.socket(zmq.PUSH, socket_class=socket_class)
    sock.setsockopt(zmq.SNDHWM, sndhwm)
    sock.setsockopt(zmq.IMMEDIATE, 1)
    sock.setsockopt(zmq.LINGER, int(linger_s * 1000))
    try:
        sock.connect(address)
    except zmq.ZMQError as exc:
        sock.close(linger=0)
        raise ChannelError(f"cannot connect to {address}: {exc}") from exc
    return sock


def _ms(timeout: float | None) -> int | None:
    return None if timeout is None else max(0, int(timeout * 1000))


class Inbox(_Base):
    """Bound ``PULL`` socket: this process's mailbox (blocking API)."""

    def __init__(
        self,
        address: str,
        *,
        codec: Codec | None = None,
        ctx: zmq.Context | None = None,
        rcvhwm: int = DEFAULT_RCVHWM,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        ctx = ctx if ctx is not None else zmq.Context.instance()
        super().__init__(_make_pull(ctx, address, rcvhwm, max_frame_bytes), address, codec)

    def recv(self, timeout: float | None = None) -> Message | None:
        """Next message, or ``None`` after ``timeout`` seconds (``None``: wait).

        Raises :class:`CodecError` for a malformed message (its shared memory
        is released); the inbox stays usable.
        """
        self._check()
        try:
            frames = self._sock.recv_multipart(flags=zmq.NOBLOCK, copy=False)
        except zmq.Again:
            if timeout is not None and not self._sock.poll(_ms(timeout), zmq.POLLIN):
                return None
            frames = self._sock.recv_multipart(copy=False)
        return _to_message(frames, self.codec)


class Outbox(_Base):
    """Connected ``PUSH`` socket to one peer's inbox (blocking API, thread-safe)."""

    def __init__(
        self,
        address: str,
        *,
        codec: Codec | None = None,
        ctx: zmq.Context | None = None,
        sndhwm: int = DEFAULT_SNDHWM,
        linger: float = DEFAULT_LINGER_S,
        send_timeout: float | None = DEFAULT_SEND_TIMEOUT_S,
    ) -> None:
        ctx = ctx if ctx is not None else zmq.Context.instance()
        super().__init__(_make_push(ctx, address, sndhwm, linger), address, codec)
        self.send_timeout = send_timeout
        self._lock = threading.Lock()

    def send(self, header: dict[str, Any], payload: Any = None, *, timeout: float | None = ...) -> None:  # type: ignore[assignment]
        """Encode and queue one message.

        Blocks for shared-memory back-pressure and while the peer is not
        connected or its queue is full; raises :class:`ChannelTimeoutError`
        after ``timeout`` seconds (default: the outbox's ``send_timeout``;
        ``None`` waits forever for the socket, and up to the pool's own
        ``timeout`` for shared memory). On any failure the payload's shared
        memory is given back.
        """
        self._check()
        timeout = self.send_timeout if timeout is ... else timeout
        env_frame = None
        encoded = self.codec.encode(payload, shm_timeout=timeout)
        try:
            env_frame = encode_envelope(header, len(encoded.leases))
            frames = [env_frame, *encoded.frames]
            with self._lock:
                self._check()
                try:
                    try:
                        # Common case first: room in the queue, no poll syscall.
                        self._sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        if timeout is not None and not self._sock.poll(_ms(timeout), zmq.POLLOUT):
                            raise ChannelTimeoutError(
                                f"could not send to {self.address} within {timeout}s: the peer is not "
                                "connected or not reading (dead, stuck, or its queue is full)"
                            ) from None
                        self._sock.send_multipart(frames, flags=zmq.NOBLOCK if timeout is not None else 0, copy=False)
                except zmq.Again:
                    raise ChannelTimeoutError(f"could not send to {self.address}: queue full") from None
                except zmq.ZMQError as exc:
                    raise ChannelError(f"send to {self.address} failed: {exc}") from exc
        except BaseException:
            encoded.release()
            raise
        encoded.mark_sent()


# The async channels call the compiled socket methods directly with plain int
# flags: pyzmq's pure-Python wrappers (send_multipart, recv_multipart, flag
# enums) cost more than libzmq's own work for a small message.
_zsend = zmq.backend.Socket.send
_zrecv = zmq.backend.Socket.recv
_NOBLOCK = int(zmq.NOBLOCK)
_NOBLOCK_MORE = int(zmq.NOBLOCK | zmq.SNDMORE)
_POLLIN = int(zmq.POLLIN)
_POLLOUT = int(zmq.POLLOUT)


def _send_nowait(sock: zmq.Socket, frames: list[Any]) -> bool:
    """Queue a multipart message without blocking; ``False`` if the socket cannot take it now.

    libzmq rolls back the parts already queued when a later part fails, so a
    ``False`` leaves nothing half-sent and the whole message can be retried.
    """
    last = len(frames) - 1
    try:
        for i, frame in enumerate(frames):
            _zsend(sock, frame, _NOBLOCK_MORE if i < last else _NOBLOCK, False)
    except zmq.Again:
        return False
    return True


def _recv_nowait(sock: zmq.Socket) -> list[Any]:
    """All frames of the next message; only call when ``ZMQ_EVENTS`` reported ``POLLIN``.

    The parts of a multipart message arrive together, so once the first is
    there the rest are too.
    """
    frame = _zrecv(sock, _NOBLOCK, False)
    frames = [frame]
    while frame.more:
        frame = _zrecv(sock, _NOBLOCK, False)
        frames.append(frame)
    return frames


class _AsyncBase(_Base):
    """A plain (blocking-API) ZeroMQ socket driven from one asyncio event loop.

    ``zmq.asyncio`` creates a Future and poller callbacks for every send and
    receive, which costs more than the message itself on a short hop. Here the
    socket is only ever used without blocking, and the loop is asked to wait
    (on the socket's ``ZMQ_FD``) only when the socket says it cannot go on.

    ``ZMQ_FD`` is edge-triggered: it signals that ``ZMQ_EVENTS`` may have
    changed, and reading ``ZMQ_EVENTS`` (or any send/recv) consumes the
    signal. So a wait re-checks ``ZMQ_EVENTS`` before sleeping and after
    every wake-up; a signal that comes after that check leaves the
    descriptor readable until the next call into the socket, which the loop
    then sees, so no message is missed. One task waits at a time (an inbox
    has one reader; an outbox waits under its lock).
    """

    _keep_reader = False  # stay registered between waits (an inbox waits after nearly every message)

    def __init__(self, sock: zmq.Socket, address: str, codec: Codec | None) -> None:
        super().__init__(sock, address, codec)
        self._fd = sock.getsockopt(zmq.FD)
        self._waiter: asyncio.Future[None] | None = None
        self._wanted = 0
        self._reader_loop: asyncio.AbstractEventLoop | None = None
        self._listener: Callable[[], None] | None = None  # see AsyncInbox.listen

    def _events(self) -> int:
        return self._sock.getsockopt(zmq.EVENTS)

    async def _wait_for(self, event: int, deadline: float | None) -> bool:
        """Wait until ``ZMQ_EVENTS`` has ``event``; ``False`` once ``deadline`` (loop time) passed."""
        loop = asyncio.get_running_loop()
        while not self._events() & event:
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            await self._signalled(loop, event, remaining)
        return True

    async def _signalled(self, loop: asyncio.AbstractEventLoop, event: int, timeout: float | None) -> None:
        """Sleep until the socket reports ``event`` (or ``timeout`` seconds pass)."""
        if self._waiter is not None:
            raise ChannelError(f"channel {self.address}: another task is already waiting on this socket")
        fut = self._waiter = loop.create_future()
        self._wanted = event
        self._watch(loop)
        timer = loop.call_later(timeout, _wake, fut) if timeout is not None else None
        woken = False
        try:
            await fut
            woken = True
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
            if not (woken and self._keep_reader):  # a cancelled or failed wait leaves nothing registered
                self._unwatch()
        self._check()

    def _on_readable(self) -> None:
        """The descriptor fired (runs on the loop).

        Reading ``ZMQ_EVENTS`` consumes the signal, so a level-triggered loop
        does not call again for the same one; the waiter is woken only when
        its event is really there (no wake-up for connection bookkeeping).
        """
        if self._closed:
            self._unwatch()
            return
        events = self._events()
        waiter = self._waiter
        if waiter is not None and events & self._wanted and not waiter.done():
            waiter.set_result(None)
        elif events & _POLLIN and self._listener is not None:
            self._listener()

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._reader_loop is loop:
            return
        self._unwatch()
        loop.add_reader(self._fd, self._on_readable)
        self._reader_loop = loop

    def _unwatch(self) -> None:
        loop, self._reader_loop = self._reader_loop, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._fd)

    def close(self, linger: float | None = None) -> None:
        """Close the socket (idempotent); a task waiting on it gets :class:`ChannelClosedError`.

        Call it from the loop's thread (or after the loop stopped).
        """
        if self._closed:
            return
        waiter, self._waiter = self._waiter, None
        self._listener = None
        self._unwatch()  # before the socket, and with it the descriptor, goes away
        super().close(linger)
        if waiter is not None and not waiter.done():
            waiter.set_exception(ChannelClosedError(f"channel {self.address} is closed"))


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else asyncio.get_running_loop().time() + timeout


DEFAULT_BATCH = 64


class AsyncInbox(_AsyncBase):
    """Bound ``PULL`` socket for asyncio.

    :meth:`recv_batch` hands over every message already queued (no await per
    message); :meth:`recv` is the one-message form. Both wait on the event
    loop only when the socket is empty. :meth:`listen` instead has a callback
    take the messages right from the loop's reader callback (what a worker
    does: no task wake-up per message).
    """

    _keep_reader = True

    def __init__(
        self,
        address: str,
        *,
        codec: Codec | None = None,
        ctx: zmq.Context | None = None,
        rcvhwm: int = DEFAULT_RCVHWM,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        ctx = ctx if ctx is not None else zmq.Context.instance()
        super().__init__(_make_pull(ctx, address, rcvhwm, max_frame_bytes, socket_class=zmq.Socket), address, codec)
        # frames received but not handed out yet: what follows a malformed message in a batch
        self._backlog: collections.deque[list[Any]] = collections.deque()

    async def recv(self, timeout: float | None = None) -> Message | None:
        """Next message, or ``None`` after ``timeout`` seconds (``None``: wait).

        Raises :class:`CodecError` for a malformed message (its shared memory
        is released); the inbox stays usable.
        """
        batch = await self._recv_frames(timeout, 1)
        return _to_message(batch[0], self.codec) if batch else None

    async def recv_batch(self, timeout: float | None = None, max_messages: int = DEFAULT_BATCH) -> list[Message]:
        """Every message already queued, up to ``max_messages``, in order: at least one,
        or ``[]`` after ``timeout`` seconds (``None``: wait).

        A malformed message ends the batch before it; the next call raises
        :class:`CodecError` for it (its shared memory released), as :meth:`recv`
        would, and the inbox stays usable.
        """
        return self._to_messages(await self._recv_frames(timeout, max_messages))

    def recv_batch_nowait(self, max_messages: int = DEFAULT_BATCH) -> list[Message]:
        """:meth:`recv_batch` without waiting: ``[]`` when nothing is queued."""
        self._check()
        return self._to_messages(self._take(max_messages))

    def listen(self, callback: Callable[[], None] | None) -> None:
        """Call ``callback()`` on the running loop whenever messages are waiting; ``None`` stops.

        The alternative to a task awaiting :meth:`recv_batch`: the callback runs
        straight from the loop's reader callback and takes the messages with
        :meth:`recv_batch_nowait` until that returns ``[]``, so a message
        reaches its handler without a Future and a task switch (one trip
        through the event loop less per message). Each notice is given once
        (the descriptor is edge-triggered): a callback that cannot take
        messages right now (its consumer is busy) just returns, they stay
        queued, and the consumer must take them itself once it is ready
        again. :meth:`recv` and :meth:`recv_batch` refuse to run meanwhile.
        """
        self._check()
        if callback is None:
            self._listener = None
            return
        if self._waiter is not None:
            raise ChannelError(f"channel {self.address}: a task is already waiting in recv()")
        loop = asyncio.get_running_loop()
        self._listener = callback
        self._watch(loop)
        loop.call_soon(self._on_readable)  # anything queued before the reader was registered

    async def _recv_frames(self, timeout: float | None, limit: int) -> list[list[Any]]:
        self._check()
        if self._listener is not None:
            raise ChannelError(f"channel {self.address}: a listener takes the messages; recv() would race it")
        batch = self._take(limit)
        if batch:
            return batch
        deadline = _deadline(timeout)
        while not batch:
            if not await self._wait_for(_POLLIN, deadline):
                return []
            batch = self._take(limit)
        return batch

    def _take(self, limit: int) -> list[list[Any]]:
        """Up to ``limit`` messages' frames without blocking: the backlog first, then the socket."""
        batch: list[list[Any]] = []
        backlog = self._backlog
        while backlog and len(batch) < limit:
            batch.append(backlog.popleft())
        sock = self._sock
        try:
            while len(batch) < limit and sock.getsockopt(zmq.EVENTS) & _POLLIN:
                batch.append(_recv_nowait(sock))
        except zmq.Again:  # not expected after POLLIN; what was taken still counts
            pass
        return batch

    def _to_messages(self, batch: list[list[Any]]) -> list[Message]:
        messages: list[Message] = []
        for index, frames in enumerate(batch):
            try:
                messages.append(_to_message(frames, self.codec))
            except CodecError:
                if not messages:
                    self._backlog.extendleft(reversed(batch[index + 1 :]))
                    raise
                self._backlog.extendleft(reversed(batch[index:]))
                break
        return messages


class AsyncOutbox(_AsyncBase):
    """Connected ``PUSH`` socket for asyncio.

    Payloads with shared-memory tensors are encoded in a worker thread (the
    copy and any back-pressure wait stay off the event loop); small ones
    inline. A send that finds room in the queue completes without
    suspending; one that has to wait holds the lock, and later sends queue
    behind it, so messages leave in the order ``send`` was called.
    """

    def __init__(
        self,
        address: str,
        *,
        codec: Codec | None = None,
        ctx: zmq.Context | None = None,
        sndhwm: int = DEFAULT_SNDHWM,
        linger: float = DEFAULT_LINGER_S,
        send_timeout: float | None = DEFAULT_SEND_TIMEOUT_S,
    ) -> None:
        ctx = ctx if ctx is not None else zmq.Context.instance()
        super().__init__(_make_push(ctx, address, sndhwm, linger, socket_class=zmq.Socket), address, codec)
        self.send_timeout = send_timeout
        self._lock = asyncio.Lock()
        self._waiting = 0  # sends between "the socket was full" and "sent" (holding or queued on the lock)

    async def send(self, header: dict[str, Any], payload: Any = None, *, timeout: float | None = ...) -> None:  # type: ignore[assignment]
        """Async :meth:`Outbox.send`; cancellation gives the shared memory back."""
        self._check()
        timeout = self.send_timeout if timeout is ... else timeout
        encoded = self.codec.encode_inline(payload)
        if encoded is None:  # a tensor goes through shared memory: copy it off the loop
            loop = asyncio.get_running_loop()
            fut = loop.run_in_executor(_executor("encode"), functools.partial(self.codec.encode, payload, shm_timeout=timeout))
            try:
                encoded = await asyncio.shield(fut)
            except asyncio.CancelledError:
                fut.add_done_callback(_release_result)
                raise
        try:
            frames = [encode_envelope(header, len(encoded.leases)), *encoded.frames]
            self._check()
            # Common case: nobody is waiting and the queue has room, so the message
            # is queued right here, without a Future, a lock or a trip through the loop.
            if self._waiting or not self._try_send(frames):
                self._waiting += 1
                try:
                    async with self._lock:
                        await self._send_when_ready(frames, timeout)
                finally:
                    self._waiting -= 1
        except BaseException:
            encoded.release()
            raise
        encoded.mark_sent()

    def _try_send(self, frames: list[Any]) -> bool:
        try:
            return _send_nowait(self._sock, frames)
        except zmq.ZMQError as exc:
            raise ChannelError(f"send to {self.address} failed: {exc}") from exc

    async def _send_when_ready(self, frames: list[Any], timeout: float | None) -> None:
        deadline = _deadline(timeout)
        while True:
            self._check()
            if self._try_send(frames):
                return
            if not await self._wait_for(_POLLOUT, deadline):
                raise ChannelTimeoutError(
                    f"could not send to {self.address} within {timeout}s: the peer is not connected or not reading "
                    "(dead, stuck, or its queue is full)"
                )
