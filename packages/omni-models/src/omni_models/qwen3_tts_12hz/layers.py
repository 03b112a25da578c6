"""The Qwen3 decoder block shared by the talker and its code predictor.

Attention (q/k/v/o) and MLP (gate/up/down) projections are built through ``column_linear`` /
``row_linear`` so a tensor-parallel build can substitute sharded linears (q/k/v, gate/up split
their outputs; o, down split their inputs) without touching the blocks. Parameter names are the
published checkpoint's (``self_attn.q_proj.weight`` ...), so a rank can read its slice by key.

Attention itself is delegated to an ``attend(layer, q, k, v)`` callback: the caller owns the KV
cache (the talker's per-request slots, the code predictor's per-frame cache).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from omni_models.common import parallel

Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class StackSpec:
    """Shape of one decoder stack, read from its ``config.json`` section."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    rope_theta: float
    bias: bool = False


def column_linear(in_features: int, out_features: int, bias: bool) -> nn.Module:
    """A projection whose outputs a tensor-parallel build splits across ranks (``parallel.building``)."""
    return parallel.column(in_features, out_features, bias)


def row_linear(in_features: int, out_features: int, bias: bool) -> nn.Module:
    """A projection whose inputs a tensor-parallel build splits across ranks (then all-reduces)."""
    return parallel.row(in_features, out_features, bias)


def no_reduce(x: torch.Tensor) -> torch.Tensor:
    return x


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotary(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin ``[..., head_dim]`` for integer ``positions`` (the halves-rotation convention)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).float() / head_dim))
    freqs = positions.float()[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, spec: StackSpec):
        super().__init__()
        self.spec = spec
        h, d = spec.hidden, spec.head_dim
        self.q_proj = column_linear(h, spec.heads * d, spec.bias)
        self.k_proj = column_linear(h, spec.kv_heads * d, spec.bias)
        self.v_proj = column_linear(h, spec.kv_heads * d, spec.bias)
        self.o_proj = row_linear(spec.heads * d, h, spec.bias)
        self.q_norm = RMSNorm(d, spec.eps)
        self.k_norm = RMSNorm(d, spec.eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attend: Attend, layer: int) -> torch.Tensor:
        """``x`` ``[B, T, hidden]``, cos/sin ``[B, T, head_dim]`` -> ``[B, T, hidden]``."""
        b, t, _ = x.shape
        d = self.spec.head_dim
        q = self.q_norm(self.q_proj(x).view(b, t, -1, d)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, t, -1, d)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, -1, d).transpose(1, 2)
        cos, sin = cos[:, None], sin[:, None]
        out = attend(layer, _rotate(q, cos, sin), _rotate(k, cos, sin), v)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = column_linear(hidden, intermediate, False)
        self.up_proj = column_linear(hidden, intermediate, False)
        self.down_proj = row_linear(intermediate, hidden, False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, spec: StackSpec):
        super().__init__()
        self.input_layernorm = RMSNorm(spec.hidden, spec.eps)
        self.self_attn = Attention(spec)
        self.post_attention_layernorm = RMSNorm(spec.hidden, spec.eps)
        self.mlp = MLP(spec.hidden, spec.intermediate)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attend: Attend, layer: int, reduce=no_reduce) -> torch.Tensor:
        x = x + reduce(self.self_attn(self.input_layernorm(x), cos, sin, attend, layer))
        return x + reduce(self.mlp(self.post_attention_layernorm(x)))


class Stack(nn.Module):
    """``layers`` + final ``norm`` (the published ``model.layers.*`` / ``model.norm`` names)."""

    def __init__(self, spec: StackSpec):
        super().__init__()
        self.spec = spec
        self.layers = nn.ModuleList(Block(spec) for _ in range(spec.layers))
        self.norm = RMSNorm(spec.hidden, spec.eps)
        self.reduce = no_reduce
        """Under tensor parallelism: the group's all-reduce (sum of the ranks' partial results)."""

    def run(self, x: torch.Tensor, positions: torch.Tensor, attend: Attend) -> torch.Tensor:
        """``x`` ``[B, T, hidden]`` at integer ``positions`` ``[B, T]`` -> normed hidden states."""
        cos, sin = rotary(positions, self.spec.head_dim, self.spec.rope_theta, x.dtype)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, attend, i, self.reduce)
        return self.norm(x)


def causal_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal self-attention over one contiguous block (a prefill), grouped-query aware."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[-2] > 1, enable_gqa=k.shape[1] != q.shape[1])
