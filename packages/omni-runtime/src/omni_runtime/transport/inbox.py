"""This process's mailbox on the event loop: a bound ``PULL`` socket.

A worker takes every queued message straight from the loop's reader callback
(:meth:`AsyncInbox.listen`), the parent drains it with
:meth:`AsyncInbox.recv_batch`; both take all queued messages in one call
instead of an await per message.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any

import zmq

from .async_base import POLLIN, AsyncSocketChannel, deadline_after, recv_nowait
from .codec import Codec
from .errors import ChannelError, CodecError
from .message import Message, to_message
from .sockets import DEFAULT_MAX_FRAME_BYTES, DEFAULT_RCVHWM, make_pull

DEFAULT_BATCH = 64


class AsyncInbox(AsyncSocketChannel):
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
        super().__init__(make_pull(ctx, address, rcvhwm, max_frame_bytes, socket_class=zmq.Socket), address, codec)
        # frames received but not handed out yet: what follows a malformed message in a batch
        self._backlog: collections.deque[list[Any]] = collections.deque()

    async def recv(self, timeout: float | None = None) -> Message | None:
        """Next message, or ``None`` after ``timeout`` seconds (``None``: wait).

        Raises :class:`CodecError` for a malformed message (its shared memory
        is released); the inbox stays usable.
        """
        batch = await self._recv_frames(timeout, 1)
        return to_message(batch[0], self.codec) if batch else None

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
        deadline = deadline_after(timeout)
        while not batch:
            if not await self._wait_for(POLLIN, deadline):
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
            while len(batch) < limit and sock.getsockopt(zmq.EVENTS) & POLLIN:
                batch.append(recv_nowait(sock))
        except zmq.Again:  # not expected after POLLIN; what was taken still counts
            pass
        return batch

    def _to_messages(self, batch: list[list[Any]]) -> list[Message]:
        messages: list[Message] = []
        for index, frames in enumerate(batch):
            try:
                messages.append(to_message(frames, self.codec))
            except CodecError:
                if not messages:
                    self._backlog.extendleft(reversed(batch[index + 1 :]))
                    raise
                self._backlog.extendleft(reversed(batch[index:]))
                break
        return messages
