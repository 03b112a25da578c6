"""The Higgs-TTS backbone: a Qwen3 decoder with the fused multi-codebook audio embedding and head.

Qwen3 blocks (pre-norm RMSNorm, grouped-query attention with per-head RMSNorm on queries and
keys, rotary positions, SwiGLU MLP), omni's own code so the serving engine can run one batched
step over requests that each keep their own KV slot. Parameter names follow the checkpoint
(``layers.N.self_attn.q_proj.weight`` under ``body.``), so loading is a prefix strip.

Every projection is built by ``make_linear`` and applied by ``apply_linear``: the two seams a
tensor-parallel build replaces (column/row-parallel linears) without touching the blocks.

The audio side: one embedding table ``[num_codebooks * vocab, hidden]`` whose rows for codebook
``c`` start at ``c * vocab``; a frame's input is the sum of its codebooks' rows. The audio head
is the same table used as a linear (``tie_word_embeddings``) or its own ``[N * vocab, hidden]``
weight, giving logits ``[B, num_codebooks, vocab]``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from omni_models.common.transformer import rows_linear

from .checkpoint import AudioShape, BackboneShape

LinearFactory = Callable[[int, int], nn.Module]
LinearApply = Callable[[nn.Module, torch.Tensor], torch.Tensor]


def make_linear(in_features: int, out_features: int) -> nn.Module:
    """A bias-free projection (Qwen3 has no attention or MLP biases)."""
    return nn.Linear(in_features, out_features, bias=False)


def apply_linear(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Batch-invariant application: a row's bits do not depend on the batch it is in."""
    return rows_linear(layer, x)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).to(x.dtype)
        return self.weight * normed


class Attend(Protocol):
    """Stores one layer's new keys/values ``[B, kv_heads, T, head_dim]`` and attends the queries."""

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor: ...


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class Qwen3Attention(nn.Module):
    def __init__(self, shape: BackboneShape, linear: LinearFactory = make_linear):
        super().__init__()
        self.shape = shape
        self.q_proj = linear(shape.hidden, shape.heads * shape.head_dim)
        self.k_proj = linear(shape.hidden, shape.kv_heads * shape.head_dim)
        self.v_proj = linear(shape.hidden, shape.kv_heads * shape.head_dim)
        self.o_proj = linear(shape.heads * shape.head_dim, shape.hidden)
        self.q_norm = RMSNorm(shape.head_dim, shape.rms_eps)
        self.k_norm = RMSNorm(shape.head_dim, shape.rms_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layer: int, cache: Attend, apply: LinearApply) -> torch.Tensor:
        b, t, _ = x.shape
        s = self.shape
        q = self.q_norm(apply(self.q_proj, x).view(b, t, s.heads, s.head_dim)).transpose(1, 2)
        k = self.k_norm(apply(self.k_proj, x).view(b, t, s.kv_heads, s.head_dim)).transpose(1, 2)
        v = apply(self.v_proj, x).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        y = cache.attend(layer, rotate(q, cos, sin), rotate(k, cos, sin), v)
        return apply(self.o_proj, y.transpose(1, 2).reshape(b, t, s.heads * s.head_dim))


class Qwen3MLP(nn.Module):
    def __init__(self, shape: BackboneShape, linear: LinearFactory = make_linear):
        super().__init__()
        self.gate_proj = linear(shape.hidden, shape.intermediate)
        self.up_proj = linear(shape.hidden, shape.intermediate)
        self.down_proj = linear(shape.intermediate, shape.hidden)

    def forward(self, x: torch.Tensor, apply: LinearApply) -> torch.Tensor:
        return apply(self.down_proj, F.silu(apply(self.gate_proj, x)) * apply(self.up_proj, x))


class Qwen3Layer(nn.Module):
    def __init__(self, shape: BackboneShape, linear: LinearFactory = make_linear):
        super().__init__()
        self.input_layernorm = RMSNorm(shape.hidden, shape.rms_eps)
        self.self_attn = Qwen3Attention(shape, linear)
        self.post_attention_layernorm = RMSNorm(shape.hidden, shape.rms_eps)
        self.mlp = Qwen3MLP(shape, linear)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layer: int, cache: Attend, apply: LinearApply) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, layer, cache, apply)
        return x + self.mlp(self.post_attention_layernorm(x), apply)


class HiggsBackbone(nn.Module):
    """Text embedding, Qwen3 body (``body.*`` in the checkpoint), fused audio embedding and head."""

    def __init__(self, shape: BackboneShape, audio: AudioShape, linear: LinearFactory = make_linear, apply: LinearApply = apply_linear):
        super().__init__()
        self.shape, self.audio, self.apply_linear = shape, audio, apply
        self.text_embedding = nn.Embedding(shape.vocab, shape.hidden)
        self.layers = nn.ModuleList(Qwen3Layer(shape, linear) for _ in range(shape.layers))
        self.norm = RMSNorm(shape.hidden, shape.rms_eps)
        self.audio_embedding = nn.Embedding(audio.num_codebooks * audio.vocab, shape.hidden)
        self.audio_head = None if audio.tied else nn.Linear(shape.hidden, audio.num_codebooks * audio.vocab, bias=False)
        self.reset_buffers()

    def reset_buffers(self, device: torch.device | str | None = None) -> None:
        """The derived (non-persistent) tensors: codebook offsets and rotary frequencies (float32)."""
        half = self.shape.head_dim // 2
        self.register_buffer("codebook_offsets", torch.arange(self.audio.num_codebooks, device=device) * self.audio.vocab, persistent=False)
        inv_freq = 1.0 / (self.shape.rope_theta ** (torch.arange(half, dtype=torch.float32, device=device) / half))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rope(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``positions`` ``[...]`` -> cos, sin ``[..., head_dim]`` (float32 angles, then ``dtype``)."""
        angles = positions.float()[..., None] * self.inv_freq
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos().to(dtype), angles.sin().to(dtype)

    def embed_text(self, ids: torch.Tensor) -> torch.Tensor:
        return self.text_embedding(ids)

    def embed_audio(self, codes: torch.Tensor) -> torch.Tensor:
        """``[..., num_codebooks]`` code ids (BOC/EOC included) -> ``[..., hidden]`` (sum over codebooks)."""
        return self.audio_embedding(codes + self.codebook_offsets).sum(dim=-2)

    def audio_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """``[B, hidden]`` -> ``[B, num_codebooks, vocab]`` in float32."""
        head = self.audio_head if self.audio_head is not None else self.audio_embedding
        logits = rows_linear(head, hidden) if isinstance(head, nn.Linear) else _rows_matmul(hidden, head.weight)
        return logits.float().view(hidden.shape[0], self.audio.num_codebooks, self.audio.vocab)

    def run(self, x: torch.Tensor, positions: torch.Tensor, cache: Attend, *, invariant: bool) -> torch.Tensor:
        """``x`` ``[B, T, hidden]`` at ``positions`` (``[T]`` shared or ``[B, 1]`` per row) -> final hidden."""
        cos, sin = self.rope(positions, x.dtype)
        if cos.dim() == 2:
            cos, sin = cos[None, None], sin[None, None]  # [1, 1, T, d]
        else:
            cos, sin = cos[:, None], sin[:, None]  # [B, 1, 1, d]
        apply = self.apply_linear if invariant else _plain
        for index, layer in enumerate(self.layers):
            x = layer(x, cos, sin, index, cache, apply)
        return self.norm(x)


def _plain(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return layer(x)


def _rows_matmul(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` with ``rows_linear``'s batch invariance, for a tied embedding table."""
    return rows_linear(SimpleNamespace(weight=weight, bias=None), x)  # type: ignore[arg-type]
