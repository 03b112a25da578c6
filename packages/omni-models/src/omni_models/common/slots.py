"""KV-cache slots that grow with the running batch: one row per request, kept compact.

A batch that gives every request its own row of one cache (rather than ``omni_models.common.batch``'s
pools of fixed spans) needs storage that grows in both rows and positions as requests join and
prompts get longer, and a way to refill a leaving row's slot with the last row so a step reads
``keys[:, :n]`` as a view. Growth doubles (at least 4 rows, 256 positions) and keeps what is
stored, so a slot's keys survive the batch growing around it.
"""

from __future__ import annotations

import torch


class SlotCache:
    """Keys/values ``[layers, rows, kv_heads, length, head_dim]``, rows compact in ``0..n-1``."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, device: torch.device, dtype: torch.dtype):
        self.shape = (layers, kv_heads, head_dim)
        self.device, self.dtype = device, dtype
        self.keys = self.values = self._alloc(0, 0)

    def _alloc(self, rows: int, length: int) -> torch.Tensor:
        layers, kv_heads, head_dim = self.shape
        return torch.zeros((layers, rows, kv_heads, length, head_dim), device=self.device, dtype=self.dtype)

    def ensure(self, rows: int, length: int) -> None:
        have_rows, have_len = self.keys.shape[1], self.keys.shape[3]
        if rows <= have_rows and length <= have_len:
            return
        new_rows = max(have_rows, rows if rows <= have_rows else max(4, 2 * have_rows, rows))
        new_len = max(have_len, length if length <= have_len else max(256, 2 * have_len, length))
        keys, values = self._alloc(new_rows, new_len), self._alloc(new_rows, new_len)
        keys[:, :have_rows, :, :have_len] = self.keys
        values[:, :have_rows, :, :have_len] = self.values
        self.keys, self.values = keys, values

    def move(self, src: int, dst: int) -> None:
        self.keys[:, dst] = self.keys[:, src]
        self.values[:, dst] = self.values[:, src]
