"""A decoder-only transformer with a real, preallocated KV cache, and a batched decode step.

Pre-norm blocks (RMSNorm, rotary attention, SwiGLU MLP) as in the autoregressive backbones of
modern TTS models. Generation prefills the prompt once, then feeds one position per step and
attends over the cached keys and values instead of recomputing the prefix.

Two ways to run the same blocks:

- ``Decoder.forward(x, cache)`` continues ``B`` sequences that advance together (a prompt's
  prefill, or a depth transformer's frames decoded in lockstep);
- ``Decoder.step(x, rows)`` advances ``B`` requests by one position each, every request at its
  own position and with its own cache (``RowAttention``): the batched step of continuous
  batching (``omni_models.common.batch``).

Tensor parallelism (``Decoder(config, shard=Shard(rank, size))``): each rank holds its slice of
the heads and of the MLP (``omni_models.common.parallel``), and one all-reduce after each attention
block and each MLP block restores the full residual stream (``attach`` gives the decoder its group).
Its caches hold only the rank's heads (``kv_config``). A ``mirror`` (rank 0 of a group, see
``omni_models.common.tp_engine``) sends every forward's inputs to the other ranks before running it,
so all ranks step together.

A request's output must not depend on who else is in its batch. CPU (and GPU) matrix kernels
pick their blocking from the number of rows, so the same row can round differently in a batch
of 1 and of 8. ``rows_linear`` therefore multiplies rows in fixed tiles of ``ROW_TILE`` (one
batched GEMM per tile, each tile computed alike), and attention reduces over a span fixed per
request, never the batch's longest; with ``invariant=True`` every per-row result is the same
bits whatever the batch holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from .parallel import Shard, column_linear, row_linear

#: Rows per GEMM in ``rows_linear``: each tile of rows is multiplied as its own matrix.
ROW_TILE = 8


@dataclass(frozen=True)
class TransformerConfig:
    dim: int = 64
    layers: int = 2
    heads: int = 4
    max_seq_len: int = 1024
    mlp_ratio: int = 2
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        if self.dim % self.heads or (self.dim // self.heads) % 2:
            raise ValueError(f"dim {self.dim} must split into {self.heads} heads of even size")

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def per_rank(self, shard: Shard | None) -> TransformerConfig:
        """The attention shape one rank holds (its heads; same head size): what its KV cache stores."""
        if shard is None or shard.size == 1:
            return self
        heads = shard.split(self.heads, "attention heads")
        return TransformerConfig(heads * self.head_dim, self.layers, heads, self.max_seq_len, self.mlp_ratio, self.rope_theta)


def rows_linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)`` with each row's bits independent of how many rows ``x`` has.

    Rows are padded to a multiple of ``ROW_TILE`` and multiplied tile by tile in one batched
    GEMM, so a row meets the same kernel whether it is alone or one of 32.
    """
    shape = x.shape
    rows = x.reshape(-1, shape[-1])
    n = rows.shape[0]
    tiles = -(-n // ROW_TILE)
    if tiles * ROW_TILE != n:
        rows = torch.cat([rows, rows.new_zeros(tiles * ROW_TILE - n, rows.shape[1])])
    weight = layer.weight.t().expand(tiles, *layer.weight.t().shape)
    tiled = rows.view(tiles, ROW_TILE, -1)
    out = torch.bmm(tiled, weight) if layer.bias is None else torch.baddbmm(layer.bias, tiled, weight)
    return out.view(tiles * ROW_TILE, -1)[:n].view(*shape[:-1], -1)


def plain_linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return layer(x)


Linear = Callable[[nn.Linear, torch.Tensor], torch.Tensor]


class Attend(Protocol):
    """Stores a layer's new keys/values and attends the queries over what the cache holds."""

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor: ...


class KVCache:
    """Keys and values of ``B`` sequences that advance together, written in place.

    Storage is ``[layers, B, heads, positions, head_dim]``; it may be a view into a larger
    pool (a request's slot), so a prefill writes straight where the batched step reads.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        self.keys, self.values = keys, values
        self.max_len = keys.shape[3]
        self.length = 0

    @classmethod
    def empty(cls, config: TransformerConfig, *, batch: int = 1, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> KVCache:
        shape = (config.layers, batch, config.heads, config.max_seq_len, config.head_dim)
        return cls(torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype))

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        t = k.shape[2]
        end = self.length + t
        self.keys[layer, :, :, self.length : end] = k
        self.values[layer, :, :, self.length : end] = v
        return causal_attention(q, self.keys[layer, :, :, :end], self.values[layer, :, :, :end], self.length)

    def advance(self, t: int) -> None:
        self.length += t


class NoCache:
    """Attention over the input alone (a full causal forward)."""

    length = 0

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return causal_attention(q, k, v, 0)

    def advance(self, t: int) -> None:
        pass


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """Queries at positions ``start..`` over keys ``0..``: each sees the keys at or before it."""
    t = q.shape[2]
    if t == 1:  # one new position attends to everything before it: no mask needed
        return F.scaled_dot_product_attention(q, k, v)
    key_pos = torch.arange(k.shape[2], device=q.device)
    query_pos = torch.arange(start, start + t, device=q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=key_pos[None, :] <= query_pos[:, None])


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rope_table(config: TransformerConfig) -> torch.Tensor:
    """``[max_seq_len, head_dim]``: cos in the first half, sin in the second (computed once)."""
    half = config.head_dim // 2
    freqs = config.rope_theta ** (-torch.arange(half, dtype=torch.float32) / half)
    angles = torch.arange(config.max_seq_len, dtype=torch.float32)[:, None] * freqs[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=-1)


def _rotate(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    cos, sin = table[..., :half], table[..., half:]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


Reduce = Callable[[torch.Tensor], torch.Tensor]


def no_reduce(x: torch.Tensor) -> torch.Tensor:
    return x


class Attention(nn.Module):
    """Self-attention over this rank's heads (all heads without TP); the output projection is
    row-parallel, so its result is a partial sum under TP (the block all-reduces it)."""

    def __init__(self, config: TransformerConfig, shard: Shard | None = None):
        super().__init__()
        self.config = config.per_rank(shard)
        self.qkv = column_linear(config.dim, (config.dim,) * 3, shard, what="attention width")
        self.out = row_linear(config.dim, config.dim, shard, what="attention width")

    def forward(self, x: torch.Tensor, rope: torch.Tensor, layer: int, cache: Attend, linear: Linear) -> torch.Tensor:
        b, t, _ = x.shape
        c = self.config
        q, k, v = linear(self.qkv, x).view(b, t, 3, c.heads, c.head_dim).permute(2, 0, 3, 1, 4)
        y = cache.attend(layer, _rotate(q, rope), _rotate(k, rope), v)
        return linear(self.out, y.transpose(1, 2).reshape(b, t, c.dim))


class Block(nn.Module):
    """Pre-norm attention block and SwiGLU MLP block; under TP one all-reduce ends each of them."""

    def __init__(self, config: TransformerConfig, shard: Shard | None = None):
        super().__init__()
        hidden = config.dim * config.mlp_ratio
        self.attn_norm = RMSNorm(config.dim)
        self.attn = Attention(config, shard)
        self.mlp_norm = RMSNorm(config.dim)
        self.gate_up = column_linear(config.dim, (hidden, hidden), shard, what="MLP hidden size")
        self.down = row_linear(hidden, config.dim, shard, what="MLP hidden size")

    def forward(self, x: torch.Tensor, rope: torch.Tensor, layer: int, cache: Attend, linear: Linear, reduce: Reduce = no_reduce) -> torch.Tensor:
        x = x + reduce(self.attn(self.attn_norm(x), rope, layer, cache, linear))
        gate, up = linear(self.gate_up, self.mlp_norm(x)).chunk(2, dim=-1)
        return x + reduce(linear(self.down, F.silu(gate) * up))


class Decoder(nn.Module):
    """Stack of causal blocks. ``forward(x, cache)`` continues the cached sequences by ``x``."""

    def __init__(self, config: TransformerConfig, shard: Shard | None = None):
        super().__init__()
        self.config = config
        self.shard = shard
        self.kv_config = config.per_rank(shard)
        self.blocks = nn.ModuleList(Block(config, shard) for _ in range(config.layers))
        self.norm = RMSNorm(config.dim)
        self.register_buffer("rope", rope_table(config), persistent=False)
        self.reduce: Reduce = no_reduce
        self.mirror = None
        """Rank 0 of a TP group: sends each forward's inputs to the other ranks (``tp_engine``)."""

    @property
    def sharded(self) -> bool:
        return self.shard is not None and self.shard.size > 1

    def attach(self, reduce: Reduce) -> None:
        """Give a sharded decoder its group's all-reduce (sum over the ranks, in place)."""
        self.reduce = reduce

    def new_cache(self, batch: int = 1) -> KVCache:
        param = next(self.parameters())
        return KVCache.empty(self.kv_config, batch=batch, device=param.device, dtype=param.dtype)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, *, invariant: bool = False) -> torch.Tensor:
        """``x`` ``[B, T, dim]`` continues ``cache``'s ``B`` sequences (all at one length)."""
        if x.dim() != 3:
            raise ValueError(f"Decoder expects [B, T, dim] input, got {tuple(x.shape)}")
        start = cache.length if cache is not None else 0
        t = x.shape[1]
        limit = min(self.config.max_seq_len, cache.max_len) if cache is not None else self.config.max_seq_len
        if start + t > limit:
            raise ValueError(
                f"sequence of {start + t} positions exceeds the model's max_seq_len {limit}; "
                "send shorter text or lower max_new_tokens"
            )
        with self.mirror.prefill(x, cache, invariant) if self.mirror is not None else contextlib.nullcontext():
            return self._run(x, self.rope[start : start + t].to(x.dtype), cache or NoCache(), rows_linear if invariant else plain_linear, t)

    def step(self, x: torch.Tensor, positions: torch.Tensor, rows: Attend) -> torch.Tensor:
        """One new position for each of ``B`` requests: ``x`` ``[B, dim]`` at ``positions`` ``[B]``
        -> ``[B, dim]``; ``rows`` holds each request's own cache (batch-invariant arithmetic)."""
        with self.mirror.step(x, positions, rows) if self.mirror is not None else contextlib.nullcontext():
            rope = self.rope[positions].to(x.dtype)[:, None, None, :]
            return self._run(x[:, None], rope, rows, rows_linear, 0)[:, 0]

    def _run(self, x: torch.Tensor, rope: torch.Tensor, cache: Attend, linear: Linear, advance: int) -> torch.Tensor:
        if self.sharded and self.reduce is no_reduce:
            raise RuntimeError("a sharded decoder needs its TP group's all-reduce (Decoder.attach) before it runs")
        for layer, block in enumerate(self.blocks):
            x = block(x, rope, layer, cache, linear, self.reduce)
        if advance and isinstance(cache, KVCache):
            cache.advance(advance)
        return self.norm(x)
