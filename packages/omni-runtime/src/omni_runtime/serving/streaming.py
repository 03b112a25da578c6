"""Client-disconnect handling: a client that goes away aborts its request everywhere.

Starlette only notices a vanished client when it next writes, which for a
slow pipeline can be many seconds later (or never, before the first byte).
Both helpers here watch the ASGI ``receive`` channel for ``http.disconnect``
while the work runs and call ``handle.cancel()`` the moment it arrives, so
every stage stops working on a request nobody will read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

log = logging.getLogger("omni.serving")
T = TypeVar("T")


class ClientGone(Exception):
    """The HTTP client disconnected; the request was cancelled."""


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def cancel_quietly(handle: Any) -> None:
    """Cancel a request even while our own task is being cancelled (server shutdown)."""
    try:
        await asyncio.shield(handle.cancel())
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a failed cancel must not hide the original outcome
        log.warning("cancelling request %s failed: %s", getattr(handle, "request_id", "?"), exc)


async def until_disconnect(request: Request, handle: Any, awaitable: Awaitable[T]) -> T:
    """Await ``awaitable``; if the client disconnects first, cancel ``handle`` and raise :class:`ClientGone`."""
    work = asyncio.ensure_future(awaitable)
    watcher = asyncio.ensure_future(_wait_disconnect(request.receive))
    try:
        done, _ = await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if work in done:
            return work.result()
        await _stop(work)
        await cancel_quietly(handle)
        raise ClientGone()
    except asyncio.CancelledError:
        await _stop(work)
        await cancel_quietly(handle)
        raise
    finally:
        await _stop(watcher)


async def _stop(task: asyncio.Future) -> None:
    if not task.done():
        task.cancel()
    with contextlib.suppress(BaseException):
        await task


class AudioStreamResponse(Response):
    """A chunked audio response that cancels its request when the client leaves.

    ``on_done(status)`` runs exactly once: 200 when every byte was sent, 499
    when the client disconnected, 500 when the pipeline failed mid-stream (the
    connection is then closed without the final chunk, so the client sees a
    truncated body rather than audio that silently ends early).
    """

    def __init__(
        self,
        body: AsyncIterator[bytes],
        *,
        handle: Any,
        media_type: str,
        headers: Mapping[str, str],
        on_done: Callable[[int], None],
    ) -> None:
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.body_iterator = body
        self._handle = handle
        self._on_done = on_done
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sender = asyncio.ensure_future(self._send_all(send))
        watcher = asyncio.ensure_future(_wait_disconnect(receive))
        status = 500
        try:
            done, _ = await asyncio.wait({sender, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if sender in done:
                error = sender.exception()
                if error is None:
                    status = 200
                elif isinstance(error, OSError):
                    status = 499  # the write failed: the client is gone
                else:
                    log.warning("streamed request %s failed mid-stream: %s", getattr(self._handle, "request_id", "?"), error)
            else:
                status = 499
        finally:
            await _stop(sender)
            await _stop(watcher)
            if status != 200:
                await cancel_quietly(self._handle)
            with contextlib.suppress(BaseException):
                await self.body_iterator.aclose()  # type: ignore[attr-defined]
            self._on_done(status)

    async def _send_all(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        async for chunk in self.body_iterator:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
