"""The per-request, per-consumer queue of streamed chunks.

Chunks from an in-process producer are put with back-pressure (the producer
waits while the queue is full); chunks arriving from another process are
appended at once, because the socket's receive loop must never stall on one
slow consumer. Their bound is the producer's credit window (:mod:`.flow`): the
channel reports each one the consumer takes (``on_taken(origin)``) so the
worker can hand the producer new credit. The queue ends with an explicit done
marker carrying the producer's final payload, never with a timeout.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from ..errors import RequestCancelled


class _Done:
    __slots__ = ("payload",)

    def __init__(self, payload: Any) -> None:
        self.payload = payload


class ChunkChannel:
    """Ordered chunks for one consumer stage of one request; lives on the worker's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, producers: int, maxsize: int = 64, on_taken: Callable[[str], None] | None = None) -> None:
        self._loop = loop
        self._items: deque[Any] = deque()
        self._origins: deque[str | None] = deque()  # parallel to _items: the remote producer of each, or None
        self._on_taken = on_taken
        self._maxsize = maxsize
        self._pending_producers = max(1, producers)
        self._upstream: Any = None
        self._getter: asyncio.Future[None] | None = None
        self._space: deque[asyncio.Future[None]] = deque()
        self._aborted: BaseException | None = None
        self.upstream_payload: Any = None

    # producer side -------------------------------------------------------
    async def put(self, chunk: Any) -> None:
        """Append with back-pressure (in-process producers)."""
        while len(self._items) >= self._maxsize and self._aborted is None:
            fut = self._loop.create_future()
            self._space.append(fut)
            await fut
        if self._aborted is not None:
            raise self._aborted
        self._push(chunk)

    def put_nowait(self, chunk: Any, origin: str | None = None) -> None:
        """Append without waiting (chunks that already crossed a socket, from the instance ``origin``)."""
        if self._aborted is None:
            self._push(chunk, origin)

    def __len__(self) -> int:
        """Chunks queued and not yet taken by the consumer."""
        return len(self._items)

    def finish(self, upstream_payload: Any) -> None:
        """One producer's done signal; the stream ends once every producer sent it."""
        if upstream_payload is not None:
            self._upstream = upstream_payload
        self._pending_producers -= 1
        if self._pending_producers == 0:
            self._push(_Done(self._upstream))

    def abort(self, error: BaseException | None = None) -> None:
        """End the stream with an error (request cancelled or failed)."""
        if self._aborted is not None:
            return
        self._aborted = error or RequestCancelled()
        self._wake_getter()
        while self._space:
            fut = self._space.popleft()
            if not fut.done():
                fut.set_result(None)

    def _push(self, item: Any, origin: str | None = None) -> None:
        self._items.append(item)
        self._origins.append(origin)
        self._wake_getter()

    def _wake_getter(self) -> None:
        if self._getter is not None and not self._getter.done():
            self._getter.set_result(None)

    # consumer side -------------------------------------------------------
    async def get(self) -> tuple[bool, Any]:
        """``(True, chunk)``, or ``(False, upstream_payload)`` at the done signal."""
        while not self._items:
            if self._aborted is not None:
                raise self._aborted
            self._getter = self._loop.create_future()
            await self._getter
        if self._aborted is not None:
            raise self._aborted
        item = self._items.popleft()
        origin = self._origins.popleft()
        if origin is not None and self._on_taken is not None:
            self._on_taken(origin)
        while self._space:
            fut = self._space.popleft()
            if not fut.done():
                fut.set_result(None)
                break
        if isinstance(item, _Done):
            self.upstream_payload = item.payload
            return False, item.payload
        return True, item

    async def aiter(self, on_end: Any = None) -> AsyncIterator[Any]:
        while True:
            more, value = await self.get()
            if not more:
                if on_end is not None:
                    on_end(value)
                return
            yield value

    def iter_blocking(self, on_end: Any = None) -> Iterator[Any]:
        """A blocking iterator for sync consumers running in a worker thread."""
        while True:
            more, value = asyncio.run_coroutine_threadsafe(self.get(), self._loop).result()
            if not more:
                if on_end is not None:
                    on_end(value)
                return
            yield value
