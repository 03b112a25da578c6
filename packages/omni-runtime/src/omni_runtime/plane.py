"""One process's end of the data plane, built on ``omni_runtime.transport``.

Every process of a run (the parent and each worker) owns one inbox bound at
its own endpoint, one outbox per peer it talks to (created on first use), and
one shared-memory pool for the large tensors it sends. All of it lives in the
run directory and under the run's shared-memory prefix, so removing those
(``RunDir.cleanup``) removes everything the run left on the host.
"""

from __future__ import annotations

import zmq

from .transport import AsyncInbox, AsyncOutbox, Codec, RunDir, ShmPool, ShmReader

DEFAULT_SHM_BUDGET = 1 << 30


class Plane:
    def __init__(self, run: RunDir, me: str, shm_budget_bytes: int = DEFAULT_SHM_BUDGET, send_timeout: float | None = None) -> None:
        self.run = run
        self.me = me
        self.send_timeout = send_timeout
        self.zctx = zmq.Context()
        self.pool = ShmPool(run.shm_prefix, budget_bytes=shm_budget_bytes)
        self.reader = ShmReader(allowed_prefix=run.shm_prefix)
        self.codec = Codec(pool=self.pool, reader=self.reader)
        self.inbox = AsyncInbox(run.address(me), codec=self.codec, ctx=self.zctx, rcvhwm=0)
        self._outboxes: dict[str, AsyncOutbox] = {}
        self._closed = False

    def outbox(self, peer: str) -> AsyncOutbox:
        box = self._outboxes.get(peer)
        if box is None:
            box = self._outboxes[peer] = AsyncOutbox(
                self.run.address(peer), codec=self.codec, ctx=self.zctx, sndhwm=0, linger=0.0, send_timeout=self.send_timeout
            )
        return box

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
