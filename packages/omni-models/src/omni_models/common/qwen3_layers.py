"""The Qwen3 decoder layer, one implementation for every real Qwen3-family stack omni runs.

Pre-norm blocks: RMSNorm (float32 statistics, the published arithmetic), grouped-query attention
with per-head RMSNorm on queries and keys, rotary positions (the halves-rotation convention), SwiGLU
MLP. Users: the Qwen3-TTS talker and code predictor (``omni_models.qwen3_tts_12hz``, whose codec
pre-transformer also borrows the norm, MLP and rotary) and the Higgs-TTS backbone
(``omni_models.higgs_tts_real``). Module names are the published checkpoints'
(``layers.N.self_attn.q_proj.weight`` ...), so each model loads by key name or a prefix strip.

What the models differ in is a parameter, not a copy:

- **who owns the KV cache**: attention is an ``attend(layer, q, k, v)`` callback (the talker's
  growing slots, the code predictor's per-frame cache, Higgs's span pools);
- **tensor parallelism**: projections are built by ``column_linear`` / ``row_linear``, which build
  this rank's slice inside ``omni_models.common.parallel.building(shard)`` and a plain
  ``nn.Linear`` outside it; a sharded stack's ``reduce`` is its group's all-reduce (one per
  attention block and per MLP block);
- **batch invariance**: ``run(..., invariant=True)`` applies every projection through
  ``rows_linear`` so a row's bits do not depend on the batch it is in (Higgs's decode step);
- **where the layers live**: ``Stack`` is ``layers`` + ``norm`` for a model whose checkpoint nests
  them under one module (the talker's ``model.``); a model with other parameters around them in its
  own order (Higgs's embeddings) holds ``blocks(spec)`` and a ``RMSNorm`` itself and calls
  ``run_stack``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import parallel
from .transformer import Linear, Reduce, no_reduce, plain_linear, rows_linear

Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""``attend(layer, q, k, v)``: store this layer's new keys/values ``[B, kv_heads, T, head_dim]``
and attend the queries over what the caller's cache holds."""


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


class RMSNorm(nn.Module):
    """Statistics in float32, the weight applied in the input's dtype (as the published Qwen3)."""

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
    """cos/sin ``[..., head_dim]`` for integer ``positions`` (float32 angles, then ``dtype``)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).float() / head_dim))
    freqs = positions.float()[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Apply rotary positions to ``x`` ``[..., head_dim]`` (the halves-rotation convention)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    """``qk_norm=False``: no per-head norm on queries and keys (the Qwen3-TTS codec's pre-transformer)."""

    def __init__(self, spec: StackSpec, qk_norm: bool = True):
        super().__init__()
        self.spec = spec
        h, d = spec.hidden, spec.head_dim
        self.q_proj = column_linear(h, spec.heads * d, spec.bias)
        self.k_proj = column_linear(h, spec.kv_heads * d, spec.bias)
        self.v_proj = column_linear(h, spec.kv_heads * d, spec.bias)
        self.o_proj = row_linear(spec.heads * d, h, spec.bias)
        self.q_norm: nn.Module = RMSNorm(d, spec.eps) if qk_norm else nn.Identity()
        self.k_norm: nn.Module = RMSNorm(d, spec.eps) if qk_norm else nn.Identity()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attend: Attend, layer: int, linear: Linear = plain_linear) -> torch.Tensor:
        """``x`` ``[B, T, hidden]``, cos/sin ``[B or 1, 1, T, head_dim]`` -> ``[B, T, hidden]`` (this rank's
        heads: ``-1`` in the views, so a sharded projection's fewer heads fit)."""
        b, t, _ = x.shape
        d = self.spec.head_dim
        q = self.q_norm(linear(self.q_proj, x).view(b, t, -1, d)).transpose(1, 2)
        k = self.k_norm(linear(self.k_proj, x).view(b, t, -1, d)).transpose(1, 2)
        v = linear(self.v_proj, x).view(b, t, -1, d).transpose(1, 2)
        out = attend(layer, rotate(q, cos, sin), rotate(k, cos, sin), v)
        return linear(self.o_proj, out.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = column_linear(hidden, intermediate, False)
        self.up_proj = column_linear(hidden, intermediate, False)
        self.down_proj = row_linear(intermediate, hidden, False)

    def forward(self, x: torch.Tensor, linear: Linear = plain_linear) -> torch.Tensor:
        return linear(self.down_proj, F.silu(linear(self.gate_proj, x)) * linear(self.up_proj, x))


class Block(nn.Module):
    def __init__(self, spec: StackSpec):
        super().__init__()
        self.input_layernorm = RMSNorm(spec.hidden, spec.eps)
        self.self_attn = Attention(spec)
        self.post_attention_layernorm = RMSNorm(spec.hidden, spec.eps)
        self.mlp = MLP(spec.hidden, spec.intermediate)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attend: Attend, layer: int, linear: Linear = plain_linear, reduce: Reduce = no_reduce
    ) -> torch.Tensor:
        x = x + reduce(self.self_attn(self.input_layernorm(x), cos, sin, attend, layer, linear))
        return x + reduce(self.mlp(self.post_attention_layernorm(x), linear))


def blocks(spec: StackSpec) -> nn.ModuleList:
    """The stack's ``layers`` (``layers.N.*`` in the checkpoints)."""
    return nn.ModuleList(Block(spec) for _ in range(spec.layers))


def run_stack(
    layers: nn.ModuleList, norm: RMSNorm, spec: StackSpec, x: torch.Tensor, positions: torch.Tensor, attend: Attend, *, invariant: bool = False, reduce: Reduce = no_reduce
) -> torch.Tensor:
    """``x`` ``[B, T, hidden]`` at integer ``positions`` -> normed hidden states ``[B, T, hidden]``.

    ``positions``: ``[B, T]`` (each row its own), or ``[T]`` shared by every row. ``invariant``:
    every projection through ``rows_linear`` (a row's bits independent of the batch)."""
    cos, sin = rotary(positions, spec.head_dim, spec.rope_theta, x.dtype)
    if cos.dim() == 2:  # positions [T]: one table for every row
        cos, sin = cos[None], sin[None]
    cos, sin = cos[:, None], sin[:, None]  # [B or 1, 1, T, head_dim]: broadcast over the heads
    linear = rows_linear if invariant else plain_linear
    for i, layer in enumerate(layers):
        x = layer(x, cos, sin, attend, i, linear, reduce)
    return norm(x)


class Stack(nn.Module):
    """``layers`` + final ``norm`` (the published ``model.layers.*`` / ``model.norm`` names)."""

    def __init__(self, spec: StackSpec):
        super().__init__()
        self.spec = spec
        self.layers = blocks(spec)
        self.norm = RMSNorm(spec.hidden, spec.eps)
        self.reduce: Reduce = no_reduce
        """Under tensor parallelism: the group's all-reduce (sum of the ranks' partial results)."""

    def run(self, x: torch.Tensor, positions: torch.Tensor, attend: Attend, *, invariant: bool = False) -> torch.Tensor:
        """``x`` ``[B, T, hidden]`` at integer ``positions`` (``[B, T]`` or ``[T]``) -> normed hidden states."""
        return run_stack(self.layers, self.norm, self.spec, x, positions, attend, invariant=invariant, reduce=self.reduce)
