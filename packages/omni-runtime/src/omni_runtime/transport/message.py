"""A received message: its header at once, its payload on demand.

A message is ``header`` (a small dict of plain values: message kind,
request id, stage, ... as the runtime defines) plus an optional payload
encoded by :class:`~omni_runtime.transport.codec.Codec`. Wire: multipart
``[envelope, body, *buffers]``. The receiver decodes the header immediately
(routing, abort checks) and the payload only when it needs it:
:meth:`Message.payload` (or ``await msg.payload_async()``), or
:meth:`Message.discard` for a dropped message, which releases its shared
memory right away (a receiver that never decodes would otherwise pin the
sender's segments until its claim timeout).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

from .codec import Codec
from .envelope import decode_envelope
from .errors import CodecError

_ASYNC_DECODE_BYTES = 4 << 20


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
        return sum(frame_len(f) for f in self.frames)

    def payload(self, *, device: Any = None) -> Any:
        """Decode and return the payload, once; see :meth:`Codec.decode`.

        The message keeps no reference to the result, so a second call raises
        :class:`CodecError`.
        """
        if self._state != "new":
            raise CodecError(f"message payload was already {self._state}; decode it once")
        frames, self.frames = self.frames, []
        self._state = "decoded"
        return self._codec.decode(frames, device=device)

    @property
    def decodes_off_loop(self) -> bool:
        """Whether :meth:`payload_async` decodes in a worker thread (shared memory, or a lot of bytes to copy)."""
        return self._state == "new" and bool(self.shm_count or self.nbytes >= _ASYNC_DECODE_BYTES)

    async def payload_async(self, *, device: Any = None) -> Any:
        """:meth:`payload`, off the event loop when it copies a lot of data."""
        if self.decodes_off_loop:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(executor("decode"), lambda: self.payload(device=device))
        return self.payload(device=device)

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


def to_message(frames: list[Any], codec: Codec) -> Message:
    """The :class:`Message` of one received multipart message; :class:`CodecError` if malformed."""
    if len(frames) < 2:
        # Nothing to release: without a body there are no segment references.
        raise CodecError(f"malformed message: {len(frames)} frame(s), expected envelope + payload")
    try:
        header, shm_count = decode_envelope(frames[0])
    except CodecError:
        codec.discard(frames[1:])
        raise
    return Message(header, frames[1:], shm_count, codec)


def frame_len(f: Any) -> int:
    if isinstance(f, (bytes, bytearray)):
        return len(f)
    if isinstance(f, memoryview):
        return f.nbytes
    return memoryview(f).nbytes


_EXECUTORS: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
_EXECUTORS_LOCK = threading.Lock()


def executor(kind: str) -> concurrent.futures.ThreadPoolExecutor:
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
