"""Blocking channels for tests and benchmarks (the runtime itself uses only the asyncio ones).

A test or benchmark process that has no event loop talks to runtime-style
peers with these: the same sockets, settings, codec and envelope as
:class:`~omni_runtime.transport.AsyncInbox` / :class:`~omni_runtime.transport.AsyncOutbox`,
with blocking calls. The outbox is guarded by a lock so threads may share it.
"""

from __future__ import annotations

import threading
from typing import Any

import zmq

from ..transport.codec import Codec
from ..transport.envelope import encode_envelope
from ..transport.errors import ChannelError, ChannelTimeoutError
from ..transport.message import Message, to_message
from ..transport.sockets import (
    DEFAULT_LINGER_S,
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_RCVHWM,
    DEFAULT_SEND_TIMEOUT_S,
    DEFAULT_SNDHWM,
    SocketChannel,
    make_pull,
    make_push,
)

__all__ = ["Inbox", "Outbox"]


def _ms(timeout: float | None) -> int | None:
    return None if timeout is None else max(0, int(timeout * 1000))


class Inbox(SocketChannel):
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
        super().__init__(make_pull(ctx, address, rcvhwm, max_frame_bytes), address, codec)

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
        return to_message(frames, self.codec)


class Outbox(SocketChannel):
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
        super().__init__(make_push(ctx, address, sndhwm, linger), address, codec)
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
        encoded = self.codec.encode(payload, shm_timeout=timeout)
        try:
            frames = [encode_envelope(header, len(encoded.leases)), *encoded.frames]
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
        encoded.mark_sent(self.address)
