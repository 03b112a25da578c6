"""The Higgs-TTS backbone: a Qwen3 decoder with the fused multi-codebook audio embedding and head.

The Qwen3 blocks are the shared ``omni_models.common.qwen3_layers`` (the same code as the Qwen3-TTS
talker), so the serving engine runs one batched step over requests that each keep their own KV
slot. Parameter names follow the checkpoint (``layers.N.self_attn.q_proj.weight`` under
``body.``), so loading is a prefix strip; the layers are built through the shared layers'
``column_linear``/``row_linear``, the seam a tensor-parallel build (``parallel.building``) uses.

The audio side: one embedding table ``[num_codebooks * vocab, hidden]`` whose rows for codebook
``c`` start at ``c * vocab``; a frame's input is the sum of its codebooks' rows. The audio head
is the same table used as a linear (``tie_word_embeddings``) or its own ``[N * vocab, hidden]``
weight, giving logits ``[B, num_codebooks, vocab]``.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from omni_models.common.qwen3_layers import Attend, RMSNorm, StackSpec, blocks, run_stack
from omni_models.common.transformer import rows_linear

from .checkpoint import AudioShape, BackboneShape


def stack_spec(shape: BackboneShape) -> StackSpec:
    """The Qwen3 body's shape in the shared layers' terms (no attention biases)."""
    return StackSpec(shape.hidden, shape.intermediate, shape.layers, shape.heads, shape.kv_heads, shape.head_dim, shape.rms_eps, shape.rope_theta)


class HiggsBackbone(nn.Module):
    """Text embedding, Qwen3 body (``body.*`` in the checkpoint), fused audio embedding and head."""

    def __init__(self, shape: BackboneShape, audio: AudioShape):
        super().__init__()
        self.shape, self.audio, self.spec = shape, audio, stack_spec(shape)
        self.text_embedding = nn.Embedding(shape.vocab, shape.hidden)
        self.layers = blocks(self.spec)
        self.norm = RMSNorm(shape.hidden, shape.rms_eps)
        self.audio_embedding = nn.Embedding(audio.num_codebooks * audio.vocab, shape.hidden)
        self.audio_head = None if audio.tied else nn.Linear(shape.hidden, audio.num_codebooks * audio.vocab, bias=False)
        self.reset_buffers()

    def reset_buffers(self, device: torch.device | str | None = None) -> None:
        """The derived (non-persistent) tensor: each codebook's first row in the fused table."""
        self.register_buffer("codebook_offsets", torch.arange(self.audio.num_codebooks, device=device) * self.audio.vocab, persistent=False)

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

    def run(self, x: torch.Tensor, positions: torch.Tensor, attend: Attend, *, invariant: bool) -> torch.Tensor:
        """``x`` ``[B, T, hidden]`` at ``positions`` (``[T]`` shared or ``[B, 1]`` per row) -> final hidden;
        ``invariant``: a row's bits independent of the batch (the decode step)."""
        return run_stack(self.layers, self.norm, self.spec, x, positions, attend, invariant=invariant)


def _rows_matmul(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` with ``rows_linear``'s batch invariance, for a tied embedding table."""
    return rows_linear(SimpleNamespace(weight=weight, bias=None), x)  # type: ignore[arg-type]
