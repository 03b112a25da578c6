"""A blocking facade over a :class:`Runtime`, for scripts and tests without an event loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Protocol

from ..errors import RequestFailed
from .handle import RequestHandle


class AsyncRuntime(Protocol):
    """What the facade drives (a :class:`~.runtime.Runtime`; named by shape so neither module imports the other)."""

    async def start(self) -> None: ...
    async def shutdown(self, grace: float = 5.0) -> None: ...
    async def submit(self, data: dict[str, Any], *, timeout: float | None = None) -> RequestHandle: ...
    def health(self) -> dict[str, Any]: ...
    def queue_depths(self) -> dict[str, int]: ...


def join_audio(parts: list[Any]) -> Any:
    """Concatenate audio chunks along time: numpy arrays (``Runtime(arrays="numpy")``) or torch tensors, never importing torch for numpy."""
    import numpy as np

    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts, axis=-1)
    import torch  # the chunks are tensors: torch is loaded already

    return torch.cat(parts, dim=-1)


class SyncRuntime:
    """Blocking facade over a :class:`Runtime` whose loop runs in a background thread.

    The loop thread lives as long as the runtime: the workers' parent-death
    signal is tied to the thread that spawned them.
    """

    def __init__(self, runtime: AsyncRuntime) -> None:
        self.runtime = runtime
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="omni-runtime-loop", daemon=True)

    def _call(self, coro: Any, timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _start(self) -> None:
        self._thread.start()
        try:
            self._call(self.runtime.start())
        except BaseException:
            self._close_loop()
            raise

    def _stop(self, grace: float = 5.0) -> None:
        try:
            self._call(self.runtime.shutdown(grace))
        finally:
            self._close_loop()

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def synthesize(self, data: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Run one request; the terminal payload's data, with streamed audio chunks joined into ``audio``."""

        async def run() -> dict[str, Any]:
            handle = await self.runtime.submit(data)
            chunks = [chunk async for chunk in handle.stream()]
            result = dict(await handle.result())
            if chunks and "audio" not in result and all(isinstance(c, dict) and "audio" in c for c in chunks):
                result["audio"] = join_audio([c["audio"] for c in chunks])
                result.setdefault("sample_rate", chunks[0].get("sample_rate"))
            if chunks:
                result.setdefault("chunks", chunks)
            return result

        return self._call(run(), timeout)

    def submit_many(self, items: list[dict[str, Any]]) -> list[dict[str, Any] | RequestFailed]:
        """Run requests concurrently; each result or its :class:`RequestFailed`."""

        async def run() -> list[Any]:
            handles = [await self.runtime.submit(item) for item in items]
            out: list[Any] = []
            for handle in handles:
                try:
                    out.append(await handle.result())
                except RequestFailed as exc:
                    out.append(exc)
            return out

        return self._call(run())

    def health(self) -> dict[str, Any]:
        return self.runtime.health()

    def queue_depths(self) -> dict[str, int]:
        return self.runtime.queue_depths()
