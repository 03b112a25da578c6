"""One process's end of the data plane, built on ``omni_runtime.transport``.

Every process of a run (the parent and each worker) owns one inbox bound at
its own endpoint, one outbox per peer it talks to (created on first use), and
one shared-memory pool for the large tensors it sends. All of it lives in the
run directory and under the run's shared-memory prefix, so removing those
(``RunDir.cleanup``) removes everything the run left on the host.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import zmq

from .transport import AsyncInbox, AsyncOutbox, Codec, RunDir, ShmPool, ShmReader
from .transport.codec import Encoded
from .transport.tcp import CountingCodec

DEFAULT_SHM_BUDGET = 1 << 30
PUBLISH_EVERY_S = 0.25
"""How stale the published byte counts may be (``omni_transport_bytes_total`` of the local backend)."""


def counts_path(run: RunDir, name: str) -> str:
    """Where the process ``name`` publishes the bytes it sent (read by the parent at scrape time)."""
    return os.path.join(run.path, f"{name}.sent.json")


def read_published(run: RunDir, names: list[str]) -> dict[str, dict[str, dict[str, int]]]:
    """The byte counts the processes ``names`` published (a process that sent nothing yet is absent)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for name in names:
        try:
            with open(counts_path(run, name), encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out[name] = {str(peer): {str(k): int(v) for k, v in counts.items()} for peer, counts in data.items() if isinstance(counts, dict)}
    return out


class Plane:
    def __init__(
        self,
        run: RunDir,
        me: str,
        shm_budget_bytes: int = DEFAULT_SHM_BUDGET,
        send_timeout: float | None = None,
        publish: bool = False,
        arrays: str = "torch",
    ) -> None:
        """``arrays``: what received tensors decode into, ``"torch"`` (a worker) or ``"numpy"`` (a parent that never loads torch)."""
        self.run = run
        self.me = me
        self.send_timeout = send_timeout
        self.zctx = zmq.Context()
        self.pool = ShmPool(run.shm_prefix, budget_bytes=shm_budget_bytes)
        self.reader = ShmReader(allowed_prefix=run.shm_prefix)
        self.codec = Codec(pool=self.pool, reader=self.reader, arrays=arrays)
        self.inbox = AsyncInbox(run.address(me), codec=self.codec, ctx=self.zctx, rcvhwm=0)
        self._outboxes: dict[str, AsyncOutbox] = {}
        self._counts: dict[str, dict[str, int]] = {}
        self._publish = publish
        self._publish_pending = False
        self._loop: asyncio.AbstractEventLoop | None = None
        if publish:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                self._publish = False  # no loop to publish from: counts stay local
        self._closed = False

    def outbox(self, peer: str) -> AsyncOutbox:
        box = self._outboxes.get(peer)
        if box is None:
            # one counting codec per peer: ipc bytes on the socket, shm bytes in segments (/metrics)
            counts = self._counts.setdefault(peer, {})
            kwargs: dict[str, Any] = {"socket_transport": "ipc", "counts": counts, "pool": self.pool, "reader": self.reader}
            codec = _PublishingCodec(self, **kwargs) if self._publish else CountingCodec(**kwargs)
            box = self._outboxes[peer] = AsyncOutbox(
                self.run.address(peer), codec=codec, ctx=self.zctx, sndhwm=0, linger=0.0, send_timeout=self.send_timeout
            )
        return box

    def sent_bytes(self) -> dict[str, dict[str, int]]:
        """Bytes sent so far, per peer and transport (``ipc``, ``shm``, ``tcp``)."""
        return {peer: dict(counts) for peer, counts in self._counts.items() if counts}

    def _schedule_publish(self) -> None:
        """Write the counts for the parent at most every :data:`PUBLISH_EVERY_S` (a worker's sends only)."""
        loop = self._loop
        if self._publish_pending or self._closed or loop is None or loop.is_closed():
            return
        self._publish_pending = True
        # large payloads are encoded (and counted) on an executor thread: arm the timer from the loop's own thread
        loop.call_soon_threadsafe(loop.call_later, PUBLISH_EVERY_S, self.publish_counts)

    def publish_counts(self) -> None:
        self._publish_pending = False
        path = counts_path(self.run, self.me)
        try:
            with open(path + ".tmp", "w", encoding="utf-8") as handle:
                json.dump(self.sent_bytes(), handle)
            os.replace(path + ".tmp", path)
        except OSError:
            pass  # the run directory is gone (shutting down): nothing left to report

    def peer_died(self, peer: str) -> int:
        """``peer`` died: reuse the segments we sent it that it never claimed (instead of after the claim timeout)."""
        return self.pool.reclaim_unclaimed(peer=self.run.address(peer))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.inbox.close(linger=0)
        for box in self._outboxes.values():
            box.close(linger=0)
        self.zctx.term()
        self.reader.close()
        self.pool.close()



class _PublishingCodec(CountingCodec):
    """Counts like :class:`CountingCodec`, then has the plane publish the counts soon (a worker's outboxes)."""

    def __init__(self, plane: Plane, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plane = plane

    def _count(self, encoded: Encoded) -> Encoded:
        out = super()._count(encoded)
        self.plane._schedule_publish()
        return out
