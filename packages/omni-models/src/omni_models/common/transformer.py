"""A decoder-only transformer with a real, preallocated KV cache.

Pre-norm blocks (RMSNorm, rotary attention, SwiGLU MLP) as in the autoregressive backbones of
modern TTS models. Generation prefills the prompt once, then feeds one position per step and
attends over the cached keys and values instead of recomputing the prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


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


class KVCache:
    """Keys and values of every layer for one sequence, written in place as generation advances."""

    def __init__(self, config: TransformerConfig, *, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32):
        shape = (config.layers, 1, config.heads, config.max_seq_len, config.head_dim)
        self.keys = torch.zeros(shape, device=device, dtype=dtype)
        self.values = torch.zeros(shape, device=device, dtype=dtype)
        self.max_len = config.max_seq_len
        self.length = 0

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``k``/``v`` ``[1, heads, t, head_dim]`` after the cached prefix; return all of it."""
        t = k.shape[2]
        end = self.length + t
        self.keys[layer, :, :, self.length : end] = k
        self.values[layer, :, :, self.length : end] = v
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]

    def advance(self, t: int) -> None:
        self.length += t


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
    cos, sin = table[:, :half], table[:, half:]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.qkv = nn.Linear(config.dim, 3 * config.dim, bias=False)
        self.out = nn.Linear(config.dim, config.dim, bias=False)

    def forward(self, x: torch.Tensor, rope: torch.Tensor, start: int, layer: int, cache: KVCache | None) -> torch.Tensor:
        b, t, _ = x.shape
        c = self.config
        q, k, v = self.qkv(x).view(b, t, 3, c.heads, c.head_dim).permute(2, 0, 3, 1, 4)
        q = _rotate(q, rope)
        k = _rotate(k, rope)
        if cache is not None:
            k, v = cache.write(layer, k, v)
        if t == 1:  # one new position attends to everything before it: no mask needed
            y = F.scaled_dot_product_attention(q, k, v)
        else:
            key_pos = torch.arange(k.shape[2], device=x.device)
            query_pos = torch.arange(start, start + t, device=x.device)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=key_pos[None, :] <= query_pos[:, None])
        return self.out(y.transpose(1, 2).reshape(b, t, c.dim))


class Block(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        hidden = config.dim * config.mlp_ratio
        self.attn_norm = RMSNorm(config.dim)
        self.attn = Attention(config)
        self.mlp_norm = RMSNorm(config.dim)
        self.gate_up = nn.Linear(config.dim, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, config.dim, bias=False)

    def forward(self, x: torch.Tensor, rope: torch.Tensor, start: int, layer: int, cache: KVCache | None) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), rope, start, layer, cache)
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Decoder(nn.Module):
    """Stack of causal blocks. ``forward(x, cache)`` continues the cached sequence by ``x``."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = RMSNorm(config.dim)
        self.register_buffer("rope", rope_table(config), persistent=False)

    def new_cache(self) -> KVCache:
        param = next(self.parameters())
        return KVCache(self.config, device=param.device, dtype=param.dtype)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        if x.dim() != 3 or x.shape[0] != 1:
            raise ValueError(f"Decoder expects [1, T, dim] input, got {tuple(x.shape)}")
        start = cache.length if cache is not None else 0
        t = x.shape[1]
        if start + t > self.config.max_seq_len:
            raise ValueError(
                f"sequence of {start + t} positions exceeds the model's max_seq_len {self.config.max_seq_len}; "
                "send shorter text or lower max_new_tokens"
            )
        rope = self.rope[start : start + t].to(x.dtype)
        for layer, block in enumerate(self.blocks):
            x = block(x, rope, start, layer, cache)
        if cache is not None:
            cache.advance(t)
        return self.norm(x)
