"""One TP group, one scheduler: rank 0 runs the engine and sends each step's inputs to the other ranks.

Rank 0 of a TP group is an ordinary engine (``StepScheduler`` over a ``DecodeBatch``) whose decoder
is sharded and carries a ``Mirror``: every operation that touches the sharded blocks or their KV
caches is first broadcast to the other ranks, which replay it (``Follower``) on their own slice, so
every collective inside the forward happens on all ranks in the same order:

- a new cache pool of a span, a request's slot added to or removed from one (the followers' pools
  are kept slot for slot like rank 0's, so a step reads every rank's cache at the same rows);
- a prefill: the slot and the embedded prompt ``[1, T, dim]``;
- a packed prefill of several requests (``DecodeBatch.join_many``): each one's slot and length, the
  positions and the embedded prompts ``[sum T, dim]``;
- a decode step: the pools' row counts, the slots that step (all, or the subset of
  ``DecodeBatch.step(only=...)``), each row's position and the embedded inputs ``[B, dim]``.

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

from .batch import KVPool, PackedPrefill, RowAttention
from .transformer import Decoder, KVCache

log = logging.getLogger("omni.tp")

NOOP, STOP, NEW_POOL, ADD, REMOVE, PREFILL, STEP, PACKED_PREFILL = range(8)
#: Operation codes from here on are free for other engines' mirrors (``qwen3_tts_12hz.tp``).
FIRST_FREE_OP = 16
HEADER = 8
#: Exit status of a rank whose group broke (a peer died or a collective timed out).
EXIT_GROUP_LOST = 75


def _group_lost(group: Any, exc: BaseException) -> None:
    log.error("%s: %s; exiting so the supervisor restarts the whole group", group.who, exc)
    logging.shutdown()
    os._exit(EXIT_GROUP_LOST)


class Mirror:
    """Rank 0's side: broadcast each operation (a header of ints, then its tensors) before running
    it, under one lock, so the collectives inside the operation follow in the same order on every
    rank; a heartbeat while idle; ``STOP`` at exit."""

    def __init__(self, group: Any, device: torch.device, dtype: torch.dtype):
        self.group, self.device, self.dtype = group, device, dtype
        self.lock = threading.Lock()
        self.last_sent = time.monotonic()
        self.stopped = False
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
        """An operation without collectives of its own (a cache slot moved)."""
        with self.lock:
            self._broadcast(values, *tensors)

    @contextlib.contextmanager
    def op(self, values: list[int], *tensors: torch.Tensor) -> Iterator[None]:
        """Broadcast an operation and hold the group while the caller runs it (its collectives)."""
        with self.lock:
            self._broadcast(values, *tensors)
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


class Follower:
    """A rank above 0: receive rank 0's operations and ``handle`` each on this rank's slice, until
    STOP or a lost group. Subclasses handle their engine's operations."""

    def __init__(self, group: Any, device: torch.device, dtype: torch.dtype):
        self.group, self.device, self.dtype = group, device, dtype
        self.steps = 0
        self.thread = threading.Thread(target=self._loop, name=f"tp-follower-{group.name}-{group.rank}", daemon=True)

    def start(self) -> Follower:
        self.thread.start()
        return self

    def recv(self, shape: tuple[int, ...], dtype: torch.dtype | None = None) -> torch.Tensor:
        return self.group.broadcast(torch.empty(shape, dtype=dtype or self.dtype, device=self.device))

    def _loop(self) -> None:
        try:
            with torch.inference_mode():
                while True:
                    header = self.recv((HEADER,), torch.long).tolist()
                    if header[0] == STOP:
                        log.info("%s: rank 0 stopped the engine", self.group.who)
                        return
                    if header[0] != NOOP:
                        self.handle(header[0], header[1:])
        except Exception as exc:  # noqa: BLE001 - the group is gone
            _group_lost(self.group, exc)

    def handle(self, op: int, args: list[int]) -> None:
        raise NotImplementedError


class DecoderMirror(Mirror):
    """Rank 0 of a sharded ``Decoder`` under ``DecodeBatch``: KV-pool changes, prefills, steps."""

    def __init__(self, group: Any, decoder: Decoder):
        param = next(decoder.parameters())
        super().__init__(group, param.device, param.dtype)
        mirror = self

        class MirroredKVPool(KVPool):
            """A KV pool whose every slot change is replayed by the other ranks."""

            def __init__(self, config, span, device, dtype):
                mirror.send([NEW_POOL, span])
                super().__init__(config, span, device, dtype)

            def add(self, row) -> KVCache:
                mirror.send([ADD, self.span])
                return super().add(row)

            def cache(self, row) -> KVCache:
                cache = super().cache(row)
                cache.address = (self.span, row.slot)
                return cache

            def remove(self, row) -> None:
                mirror.send([REMOVE, self.span, row.slot])
                super().remove(row)

        self.pool_type = MirroredKVPool

    @contextlib.contextmanager
    def prefill(self, x: torch.Tensor, cache: Any, invariant: bool) -> Iterator[None]:
        address = getattr(cache, "address", None)
        if address is None:
            raise RuntimeError("a sharded decoder prefills only into a slot of the engine's KV pools")
        with self.op([PREFILL, address[0], address[1], x.shape[1], int(invariant)], x.to(self.device, self.dtype)):
            yield

    @contextlib.contextmanager
    def step(self, x: torch.Tensor, positions: torch.Tensor, rows: RowAttention | PackedPrefill) -> Iterator[None]:
        if isinstance(rows, PackedPrefill):
            addresses = [getattr(cache, "address", None) for cache, _, _ in rows.segments]
            if any(a is None for a in addresses):
                raise RuntimeError("a sharded decoder prefills only into slots of the engine's KV pools")
            segments = torch.tensor([v for (span, slot), (_, start, end) in zip(addresses, rows.segments) for v in (span, slot, end - start)], dtype=torch.long, device=self.device)
            with self.op([PACKED_PREFILL, x.shape[0], len(rows.segments)], segments, positions.to(self.device, torch.long), x.to(self.device, self.dtype)):
                yield
            return
        segments = torch.tensor([v for pool, start, end, *_ in rows.segments for v in (pool.span, end - start, len(pool.rows))], dtype=torch.long, device=self.device)
        slots = torch.cat([seg[3].to(self.device, torch.long) for seg in rows.segments])
        with self.op([STEP, x.shape[0], len(rows.segments)], segments, slots, positions.to(self.device, torch.long), x.to(self.device, self.dtype)):
            yield


class _Slot:
    """A follower's stand-in for rank 0's request row (a pool only needs its slot)."""

    pool: Any = None
    slot: int = -1


class DecoderFollower(Follower):
    """Replays ``DecoderMirror``'s operations on this rank's decoder slice and KV pools."""

    def __init__(self, group: Any, decoder: Decoder):
        param = next(decoder.parameters())
        super().__init__(group, param.device, param.dtype)
        self.decoder = decoder
        self.pools: dict[int, KVPool] = {}

    def handle(self, op: int, args: list[int]) -> None:
        if op == NEW_POOL:
            self.pools[args[0]] = KVPool(self.decoder.kv_config, args[0], self.device, self.dtype)
        elif op == ADD:
            self.pools[args[0]].add(_Slot())
        elif op == REMOVE:
            pool = self.pools[args[0]]
            pool.remove(pool.rows[args[1]])
        elif op == PREFILL:
            span, slot, t, invariant = args[:4]
            x = self.recv((1, t, self.decoder.config.dim))
            pool = self.pools[span]
            self.decoder(x, KVCache(pool.keys[:, slot : slot + 1], pool.values[:, slot : slot + 1]), invariant=bool(invariant))
        elif op == PACKED_PREFILL:
            total, nseg = args[:2]
            segments = self.recv((3 * nseg,), torch.long).tolist()
            positions = self.recv((total,), torch.long)
            x = self.recv((total, self.decoder.config.dim))
            caches, start = [], 0
            for span, slot, t in zip(segments[::3], segments[1::3], segments[2::3]):
                pool = self.pools[span]
                caches.append((KVCache(pool.keys[:, slot : slot + 1], pool.values[:, slot : slot + 1]), start, start + t))
                start += t
            self.decoder.step(x, positions, PackedPrefill(caches))
        elif op == STEP:
            batch, npools = args[:2]
            segments = self.recv((3 * npools,), torch.long).tolist()
            slots = self.recv((batch,), torch.long).tolist()
            positions = self.recv((batch,), torch.long)
            x = self.recv((batch, self.decoder.config.dim))
            pools = [self.pools[span] for span in segments[::3]]
            counts = [len(p.rows) for p in pools]
            if counts != segments[2::3]:
                raise RuntimeError(f"{self.group.who}: KV pools out of step with rank 0 (rows {counts}, rank 0 has {segments[2::3]})")
            stepping, start = [], 0
            for pool, n in zip(pools, segments[1::3]):
                stepping.append((pool, [pool.rows[slot] for slot in slots[start : start + n]]))
                start += n
            self.decoder.step(x, positions, RowAttention(stepping, positions))
            self.steps += 1
        else:
            raise RuntimeError(f"{self.group.who}: unknown operation {op} from rank 0")


def engage(model: Any, group: Any) -> Any:
    """Wire a sharded ``ARModel`` into its group: rank 0 mirrors, the others follow (idempotent)."""
    decoder = model.decoder
    if getattr(model, "tp_engaged", False):
        return model
    decoder.attach(group.all_reduce)
    if group.rank == 0:
        decoder.mirror = mirror = DecoderMirror(group, decoder)
        model.kv_pool_type = mirror.pool_type
    else:
        model.tp_follower = DecoderFollower(group, decoder).start()
    model.tp_engaged = True
    return model
