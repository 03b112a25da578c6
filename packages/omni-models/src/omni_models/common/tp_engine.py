"""One TP group, one scheduler: rank 0 runs the engine and sends each step's inputs to the other ranks.

Rank 0 of a TP group is an ordinary engine (``StepScheduler`` over a ``DecodeBatch``) whose decoder
is sharded and carries a ``Mirror``: every operation that touches the sharded blocks or their KV
caches is first broadcast to the other ranks, which replay it (``Follower``) on their own slice, so
every collective inside the forward happens on all ranks in the same order:

- a new cache pool of a span, a request's slot added to or removed from one (the followers' pools
  are kept slot for slot like rank 0's, so a step reads every rank's cache at the same rows);
- a prefill: the slot and the embedded prompt ``[1, T, dim]``;
- a decode step: the pools' row counts, each row's position and the embedded inputs ``[B, dim]``.

Embedding, logits, sampling, the depth transformer and each request's frame state run on rank 0
only (their weights are replicated, see ``omni_models.common.parallel``); so does everything the
runtime does with a request: only rank 0 receives requests and sends downstream.

A follower waits for the next operation inside a broadcast, which has the group's collective
timeout; while rank 0 is idle it sends a heartbeat (``NOOP``) every quarter of that timeout, so an
idle group stays up and a lost rank 0 is still an error within one timeout. A failed collective on
any rank ends that rank's process (exit status ``EXIT_GROUP_LOST``): the group is broken and the
supervisor restarts all of its ranks together.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import torch

from .batch import KVPool, RowAttention
from .transformer import Decoder, KVCache

log = logging.getLogger("omni.tp")

NOOP, NEW_POOL, ADD, REMOVE, PREFILL, STEP, STOP = range(7)
HEADER = 8
#: Exit status of a rank whose group broke (a peer died or a collective timed out).
EXIT_GROUP_LOST = 75


def _group_lost(group: Any, exc: BaseException) -> None:
    log.error("%s: %s; exiting so the supervisor restarts the whole group", group.who, exc)
    logging.shutdown()
    os._exit(EXIT_GROUP_LOST)


class Mirror:
    """Rank 0's side: broadcast each operation on the sharded decoder before running it."""

    def __init__(self, group: Any, decoder: Decoder):
        self.group, self.decoder = group, decoder
        param = next(decoder.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.lock = threading.Lock()
        self.last_sent = time.monotonic()
        self.stopped = False
        mirror = self

        class MirroredKVPool(KVPool):
            """A KV pool whose every slot change is replayed by the other ranks."""

            def __init__(self, config, span, device, dtype):
                mirror.send([NEW_POOL, span])
                super().__init__(config, span, device, dtype)

            def add(self, row) -> KVCache:
                mirror.send([ADD, self.span])
                cache = super().add(row)
                cache.address = (self.span, row.slot)
                return cache

            def remove(self, row) -> None:
                mirror.send([REMOVE, self.span, row.slot])
                super().remove(row)

        self.pool_type = MirroredKVPool
        interval = max(0.05, group.rendezvous.collective_timeout_s / 4) if group.rendezvous is not None else 15.0
        threading.Thread(target=self._heartbeat, args=(interval,), name=f"tp-heartbeat-{group.name}", daemon=True).start()
        atexit.register(self.stop)

    def _broadcast(self, values: list[int], *tensors: torch.Tensor) -> None:
        header = torch.zeros(HEADER, dtype=torch.long, device=self.device)
        header[: len(values)] = torch.tensor(values, dtype=torch.long)
        try:
            self.group.broadcast(header)
            for tensor in tensors:
                self.group.broadcast(tensor.contiguous())
        except Exception as exc:  # noqa: BLE001 - the group is gone
            _group_lost(self.group, exc)
        self.last_sent = time.monotonic()

    def send(self, values: list[int], *tensors: torch.Tensor) -> None:
        with self.lock:
            self._broadcast(values, *tensors)

    @contextlib.contextmanager
    def prefill(self, x: torch.Tensor, cache: Any, invariant: bool) -> Iterator[None]:
        address = getattr(cache, "address", None)
        if address is None:
            raise RuntimeError("a sharded decoder prefills only into a slot of the engine's KV pools")
        with self.lock:
            self._broadcast([PREFILL, address[0], address[1], x.shape[1], int(invariant)], x.to(self.device, self.dtype))
            yield

    @contextlib.contextmanager
    def step(self, x: torch.Tensor, positions: torch.Tensor, rows: RowAttention) -> Iterator[None]:
        segments = torch.tensor([v for pool, start, end, *_ in rows.segments for v in (pool.span, end - start)], dtype=torch.long, device=self.device)
        with self.lock:
            self._broadcast([STEP, x.shape[0], len(rows.segments)], segments, positions.to(self.device, torch.long), x.to(self.device, self.dtype))
            yield

    def _heartbeat(self, interval: float) -> None:
        while not self.stopped:
            time.sleep(interval / 2)
            if time.monotonic() - self.last_sent >= interval and self.lock.acquire(blocking=False):
                try:
                    if not self.stopped:
                        self._broadcast([NOOP])
                finally:
                    self.lock.release()

    def stop(self) -> None:
        """Tell the other ranks this engine stops (process exit): they leave their loop quietly."""
        if self.stopped or self.group.broken:
            return
        if self.lock.acquire(timeout=2.0):
            try:
                self.stopped = True
                with contextlib.suppress(Exception):
                    header = torch.zeros(HEADER, dtype=torch.long, device=self.device)
                    header[0] = STOP
                    self.group.broadcast(header)
            finally:
                self.lock.release()


class _Slot:
    """A follower's stand-in for rank 0's request row (a pool only needs its slot)."""

    pool: Any = None
    slot: int = -1


class Follower:
    """A rank above 0: replay rank 0's operations on this rank's slice, until STOP or a lost group."""

    def __init__(self, group: Any, decoder: Decoder):
        self.group, self.decoder = group, decoder
        param = next(decoder.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.pools: dict[int, KVPool] = {}
        self.steps = 0
        self.thread = threading.Thread(target=self._loop, name=f"tp-follower-{group.name}-{group.rank}", daemon=True)

    def start(self) -> Follower:
        self.thread.start()
        return self

    def _recv(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return self.group.broadcast(torch.empty(shape, dtype=dtype, device=self.device))

    def _loop(self) -> None:
        try:
            with torch.inference_mode():
                while self._one():
                    pass
        except Exception as exc:  # noqa: BLE001 - the group is gone
            _group_lost(self.group, exc)

    def _one(self) -> bool:
        header = self._recv((HEADER,), torch.long).tolist()
        op = header[0]
        if op == STOP:
            log.info("%s: rank 0 stopped the engine", self.group.who)
            return False
        if op == NEW_POOL:
            self.pools[header[1]] = KVPool(self.decoder.kv_config, header[1], self.device, self.dtype)
        elif op == ADD:
            self.pools[header[1]].add(_Slot())
        elif op == REMOVE:
            pool = self.pools[header[1]]
            pool.remove(pool.rows[header[2]])
        elif op == PREFILL:
            span, slot, t, invariant = header[1:5]
            x = self._recv((1, t, self.decoder.config.dim), self.dtype)
            pool = self.pools[span]
            self.decoder(x, KVCache(pool.keys[:, slot : slot + 1], pool.values[:, slot : slot + 1]), invariant=bool(invariant))
        elif op == STEP:
            batch, npools = header[1:3]
            segments = self._recv((2 * npools,), torch.long).tolist()
            positions = self._recv((batch,), torch.long)
            x = self._recv((batch, self.decoder.config.dim), self.dtype)
            pools = [self.pools[span] for span in segments[::2]]
            counts = [len(p.rows) for p in pools]
            if counts != segments[1::2]:
                raise RuntimeError(f"{self.group.who}: KV pools out of step with rank 0 (rows {counts}, rank 0 has {segments[1::2]})")
            self.decoder.step(x, positions, RowAttention(pools, positions))
            self.steps += 1
        return True


def engage(model: Any, group: Any) -> Any:
    """Wire a sharded model into its group: rank 0 mirrors, the others follow (idempotent)."""
    decoder = model.decoder
    if getattr(model, "tp_engaged", False):
        return model
    decoder.attach(group.all_reduce)
    if group.rank == 0:
        decoder.mirror = mirror = Mirror(group, decoder)
        model.kv_pool_type = mirror.pool_type
    else:
        model.tp_follower = Follower(group, decoder).start()
    model.tp_engaged = True
    return model
