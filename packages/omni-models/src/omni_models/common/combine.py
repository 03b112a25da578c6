"""Calls that arrive together from many threads run as one batched call (flat combining).

A streaming vocoder is called once per chunk, from the thread of each request's ``consume``.
Chunks of different requests that arrive while a batch is running wait for it to finish and
then run together: the first waiting caller becomes the next *leader*, takes everything that
queued, runs one forward per group of equal shapes, hands each caller its own result and
passes leadership on. Nobody waits on a timer, so a lone request pays no batching delay, and
under load every forward carries as many chunks as arrived during the previous one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

import torch


class _Slot:
    __slots__ = ("error", "item", "lead", "ready", "result")

    def __init__(self, item: torch.Tensor):
        self.item = item
        self.result: torch.Tensor | None = None
        self.error: BaseException | None = None
        self.lead = False
        self.ready = threading.Event()


class Combiner:
    """``combiner(x)`` returns ``run_batch(stack([x, ...]))[i]`` for its own ``x``; items with
    equal ``key`` (default: shape, dtype and device) that are waiting at once share one call."""

    def __init__(self, run_batch: Callable[[torch.Tensor], torch.Tensor], *, max_batch: int = 32, key: Callable[[torch.Tensor], Hashable] | None = None):
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be an integer >= 1, got {max_batch!r}")
        self.run_batch = run_batch
        self.max_batch = max_batch
        self.key = key or (lambda x: (tuple(x.shape), x.dtype, x.device))
        self._lock = threading.Lock()
        self._pending: list[_Slot] = []
        self._busy = False
        self.calls = 0
        self.items = 0

    def __call__(self, item: torch.Tensor) -> Any:
        slot = _Slot(item)
        with self._lock:
            self._pending.append(slot)
            lead = slot.lead = not self._busy
            self._busy = True
        if not lead:
            slot.ready.wait()
        if slot.lead:
            self._lead()
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _lead(self) -> None:
        with self._lock:
            taken, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
        groups: dict[Hashable, list[_Slot]] = {}
        for slot in taken:
            groups.setdefault(self.key(slot.item), []).append(slot)
        for slots in groups.values():
            try:
                out = self.run_batch(torch.stack([s.item for s in slots]))
                for i, s in enumerate(slots):
                    s.result = out[i]
            except Exception as exc:  # noqa: BLE001 - every caller of the failed batch gets the error
                for s in slots:
                    s.error = exc
            self.calls += 1
            self.items += len(slots)
        with self._lock:
            successor = self._pending[0] if self._pending else None
            if successor is None:
                self._busy = False
            else:
                successor.lead = True
        for slot in taken:
            slot.ready.set()
        if successor is not None:
            successor.ready.set()
