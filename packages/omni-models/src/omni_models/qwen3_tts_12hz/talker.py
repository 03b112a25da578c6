"""The talker (codebook 0 at 12.5 Hz) and its code predictor (codebooks 1..G-1 of each frame).

Module and parameter names follow the published checkpoint under ``talker.``
(``model.layers.*``, ``model.codec_embedding``, ``model.text_embedding``, ``text_projection``,
``codec_head``, ``code_predictor.*``), so loading is by key name with no renaming table.
The batched decode (one forward per step across requests, one cache slot per request) lives in
``omni_models.qwen3_tts_12hz.batch``; this module holds the weights and the per-call maths.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from omni_models.common.parallel import Shard, building
from omni_models.common.qwen3_layers import Stack, StackSpec

from .spec import ModelSpec


class TextProjection(nn.Module):
    """Text embedding (``text_hidden``) -> talker hidden: fc1, SiLU, fc2 (with biases)."""

    def __init__(self, text_hidden: int, hidden: int):
        super().__init__()
        self.linear_fc1 = nn.Linear(text_hidden, text_hidden, bias=True)
        self.linear_fc2 = nn.Linear(text_hidden, hidden, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_fc2(F.silu(self.linear_fc1(x)))


class TalkerModel(Stack):
    def __init__(self, spec: StackSpec, codec_vocab: int, text_vocab: int, text_hidden: int):
        super().__init__(spec)
        self.codec_embedding = nn.Embedding(codec_vocab, spec.hidden)
        self.text_embedding = nn.Embedding(text_vocab, text_hidden)


class PredictorModel(Stack):
    def __init__(self, spec: StackSpec, groups: int, codebook: int, talker_hidden: int):
        super().__init__(spec)
        self.codec_embedding = nn.ModuleList(nn.Embedding(codebook, talker_hidden) for _ in range(groups - 1))


class CodePredictor(nn.Module):
    """Codebooks 1..G-1 of one frame from the talker's hidden state and codebook 0.

    All rows of a batch are at the same positions (0..G-1 of their frame), so a batch decodes in
    lockstep with a fresh per-frame cache and no masking beyond causality.
    """

    def __init__(self, spec: StackSpec, talker_hidden: int, groups: int, codebook: int):
        super().__init__()
        self.groups = groups
        self.model = PredictorModel(spec, groups, codebook, talker_hidden)
        self.lm_head = nn.ModuleList(nn.Linear(spec.hidden, codebook, bias=False) for _ in range(groups - 1))
        self.small_to_mtp_projection = nn.Linear(talker_hidden, spec.hidden, bias=True) if spec.hidden != talker_hidden else nn.Identity()

    def generate(self, hidden: torch.Tensor, first_embed: torch.Tensor, pick: Callable[[int, torch.Tensor], torch.Tensor]) -> list[torch.Tensor]:
        """``hidden``/``first_embed`` ``[B, talker_hidden]`` -> codes of groups 1..G-1 (``[B]`` each);
        ``pick(group, logits [B, V])`` samples each row with its request's sub-talker settings."""
        spec = self.model.spec
        b = hidden.shape[0]
        total = self.groups
        keys = hidden.new_zeros((spec.layers, b, spec.kv_heads, total, spec.head_dim))
        values = torch.zeros_like(keys)
        state = {"start": 0}

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            start, n = state["start"], k.shape[2]
            keys[layer, :, :, start : start + n] = k
            values[layer, :, :, start : start + n] = v
            kk, vv = keys[layer, :, :, : start + n], values[layer, :, :, : start + n]
            return F.scaled_dot_product_attention(q, kk, vv, is_causal=n > 1, enable_gqa=spec.kv_heads != spec.heads)

        x = self.small_to_mtp_projection(torch.stack([hidden, first_embed], dim=1))
        positions = torch.arange(2, device=hidden.device).expand(b, 2)
        out = self.model.run(x, positions, attend)[:, -1]
        state["start"] = 2
        codes = []
        for group in range(1, total):
            code = pick(group, self.lm_head[group - 1](out))
            codes.append(code)
            if group == total - 1:
                break
            x = self.small_to_mtp_projection(self.model.codec_embedding[group - 1](code))[:, None]
            positions = torch.full((b, 1), state["start"], device=hidden.device)
            out = self.model.run(x, positions, attend)[:, -1]
            state["start"] += 1
        return codes

    def embed(self, codes: torch.Tensor, first_embed: torch.Tensor) -> torch.Tensor:
        """Sum of a frame's input embeddings: codebook 0 (``first_embed``) plus groups 1..G-1 of ``codes`` ``[B, G-1]``."""
        total = first_embed
        for i, table in enumerate(self.model.codec_embedding):
            total = total + table(codes[:, i])
        return total


class Talker(nn.Module):
    """``shard``: this rank's slice of the talker's decoder layers under tensor parallelism
    (``omni_models.qwen3_tts_12hz.tp``); embeddings, heads and the code predictor stay whole."""

    def __init__(self, spec: ModelSpec, shard: Shard | None = None):
        super().__init__()
        self.spec = spec
        t = spec.talker
        with building(shard):
            self.model = TalkerModel(t, spec.codec_vocab, spec.text_vocab, spec.text_hidden)
        self.text_projection = TextProjection(spec.text_hidden, t.hidden)
        self.codec_head = nn.Linear(t.hidden, spec.codec_vocab, bias=False)
        self.code_predictor = CodePredictor(spec.predictor, t.hidden, spec.num_code_groups, spec.predictor_vocab)

    def text(self, ids: list[int] | torch.Tensor) -> torch.Tensor:
        """Projected text embeddings ``[n, hidden]``."""
        ids = torch.as_tensor(ids, device=self.codec_head.weight.device)
        return self.text_projection(self.model.text_embedding(ids))

    def codec(self, ids: list[int] | torch.Tensor) -> torch.Tensor:
        """Codec-vocabulary embeddings ``[n, hidden]``."""
        ids = torch.as_tensor(ids, device=self.codec_head.weight.device)
        return self.model.codec_embedding(ids)

    def frame_embeddings(self, codes: torch.Tensor) -> torch.Tensor:
        """Reference codes ``[T, G]`` -> summed frame embeddings ``[T, hidden]`` (voice-cloning prompt)."""
        codes = codes.to(self.codec_head.weight.device)
        return self.code_predictor.embed(codes[:, 1:], self.codec(codes[:, 0]))

