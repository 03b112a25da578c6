"""ZeroMQ ``ipc://`` sockets as channels: one inbox per process, one outbox per peer.

Every process (parent and each child instance) binds an **inbox** (``PULL``)
at ``run_dir.address(<instance name>)``; a process that talks to a peer
connects an **outbox** (``PUSH``) to the peer's inbox. Messages from one
outbox arrive in order.

Socket settings: outboxes set ``ZMQ_IMMEDIATE`` (a send waits for a live
connection instead of queueing to nowhere), a send high-water mark and a
linger; inboxes set a receive high-water mark and ``ZMQ_MAXMSGSIZE`` (a peer
sending an oversized frame is disconnected by ZeroMQ). This module holds what
the asyncio channels (:mod:`.inbox`, :mod:`.outbox`) and the blocking ones of
:mod:`omni_runtime.testing` share.
"""

from __future__ import annotations

from typing import Any

import zmq

from .codec import Codec
from .errors import ChannelClosedError, ChannelError

DEFAULT_SNDHWM = 64
DEFAULT_RCVHWM = 64
DEFAULT_LINGER_S = 1.0
DEFAULT_SEND_TIMEOUT_S = 30.0
DEFAULT_MAX_FRAME_BYTES = 1 << 31


class SocketChannel:
    """A ZeroMQ socket with its address and codec; closing is idempotent."""

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


def make_pull(ctx: zmq.Context, address: str, rcvhwm: int, max_frame_bytes: int, socket_class: Any = None) -> zmq.Socket:
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


def make_push(ctx: zmq.Context, address: str, sndhwm: int, linger_s: float, socket_class: Any = None) -> zmq.Socket:
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
