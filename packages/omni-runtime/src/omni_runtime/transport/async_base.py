"""A plain ZeroMQ socket driven from one asyncio event loop, without ``zmq.asyncio``.

``zmq.asyncio`` creates a Future and poller callbacks for every send and
receive, which costs more than the message itself on a short hop. Here the
socket is only ever used without blocking, and the loop is asked to wait (on
the socket's ``ZMQ_FD``) only when the socket says it cannot go on. The
compiled socket methods are called directly with plain int flags: pyzmq's
pure-Python wrappers (``send_multipart``, flag enums) cost more than libzmq's
own work for a small message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import zmq

from .codec import Codec
from .errors import ChannelClosedError, ChannelError
from .sockets import SocketChannel

_zsend = zmq.backend.Socket.send
_zrecv = zmq.backend.Socket.recv
_NOBLOCK = int(zmq.NOBLOCK)
_NOBLOCK_MORE = int(zmq.NOBLOCK | zmq.SNDMORE)
POLLIN = int(zmq.POLLIN)
POLLOUT = int(zmq.POLLOUT)


def send_nowait(sock: zmq.Socket, frames: list[Any]) -> bool:
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


def recv_nowait(sock: zmq.Socket) -> list[Any]:
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


def deadline_after(timeout: float | None) -> float | None:
    return None if timeout is None else asyncio.get_running_loop().time() + timeout


class AsyncSocketChannel(SocketChannel):
    """A socket used only with ``NOBLOCK``, that waits on the loop through ``ZMQ_FD``.

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
        elif events & POLLIN and self._listener is not None:
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
