"""A connected ``PUSH`` socket to one peer's inbox, for asyncio.

Payloads with shared-memory tensors are encoded in a worker thread (the copy
and any back-pressure wait stay off the event loop); small ones inline, in
the same walk that checks them.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import zmq

from .async_base import POLLOUT, AsyncSocketChannel, deadline_after, send_nowait
from .codec import Codec
from .envelope import encode_envelope
from .errors import ChannelError, ChannelTimeoutError
from .message import executor
from .sockets import DEFAULT_LINGER_S, DEFAULT_SEND_TIMEOUT_S, DEFAULT_SNDHWM, make_push


class AsyncOutbox(AsyncSocketChannel):
    """Connected ``PUSH`` socket for asyncio.

    A send that finds room in the queue completes without suspending; one
    that has to wait holds the lock, and later sends queue behind it, so
    messages leave in the order ``send`` was called.
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
        super().__init__(make_push(ctx, address, sndhwm, linger, socket_class=zmq.Socket), address, codec)
        self.send_timeout = send_timeout
        self._lock = asyncio.Lock()
        self._waiting = 0  # sends between "the socket was full" and "sent" (holding or queued on the lock)

    async def send(self, header: dict[str, Any], payload: Any = None, *, timeout: float | None = ...) -> None:  # type: ignore[assignment]
        """Encode and queue one message; cancellation gives the shared memory back.

        Waits for shared-memory back-pressure and while the peer is not
        connected or its queue is full; raises :class:`ChannelTimeoutError`
        after ``timeout`` seconds (default: the outbox's ``send_timeout``;
        ``None`` waits forever for the socket, and up to the pool's own
        timeout for shared memory).
        """
        self._check()
        timeout = self.send_timeout if timeout is ... else timeout
        encoded = self.codec.encode_inline(payload)
        if encoded is None:  # a tensor goes through shared memory: copy it off the loop
            loop = asyncio.get_running_loop()
            fut = loop.run_in_executor(executor("encode"), functools.partial(self.codec.encode, payload, shm_timeout=timeout))
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
        encoded.mark_sent(self.address)

    def _try_send(self, frames: list[Any]) -> bool:
        try:
            return send_nowait(self._sock, frames)
        except zmq.ZMQError as exc:
            raise ChannelError(f"send to {self.address} failed: {exc}") from exc

    async def _send_when_ready(self, frames: list[Any], timeout: float | None) -> None:
        deadline = deadline_after(timeout)
        while True:
            self._check()
            if self._try_send(frames):
                return
            if not await self._wait_for(POLLOUT, deadline):
                raise ChannelTimeoutError(
                    f"could not send to {self.address} within {timeout}s: the peer is not connected or not reading "
                    "(dead, stuck, or its queue is full)"
                )


def _release_result(fut: asyncio.Future[Any]) -> None:
    # An encode that finished after its sender was cancelled: give back its leases.
    if not fut.cancelled() and fut.exception() is None:
        fut.result().release()
