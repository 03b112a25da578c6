"""The autoregressive speech-token engine shared by every codec-token model.

One transformer (with a KV cache) reads a prompt — a conditioning vector (speaker or voice),
the text tokens and optional reference audio codes — and then generates audio frames of ``K``
codebooks. Three output layouts cover the models:

- ``parallel``: one linear head per codebook, all codes of a frame from one step
  (Audar, Voxtral, CosyVoice3 with ``K = 1``);
- ``delay``: parallel heads with the delay pattern, codebook ``k`` lagging ``k`` steps
  (MOSS-TTS Delay, Zonos2, Higgs);
- ``depth``: the backbone predicts codebook 0 and a small depth transformer with its own KV
  cache predicts codebooks 1..K-1 of the same frame (FishAudio S2-Pro's dual AR, Qwen3-TTS's
  code predictor, MOSS-TTS Local's local transformer).

Code ids ``0..V-1`` are audio codes; ``V`` is end-of-speech, ``V+1`` the delay pattern's BOS and
``V+2`` its PAD.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .audio import VOICES
from .delay import DelayAligner
from .limits import GenerationLimits
from .parallel import Shard
from .transformer import Decoder, TransformerConfig, rows_linear

LAYOUTS = ("parallel", "delay", "depth")


@dataclass(frozen=True)
class ARConfig:
    num_codebooks: int
    codebook_size: int
    layout: str = "parallel"
    text_vocab: int = 259
    dim: int = 64
    layers: int = 2
    heads: int = 4
    max_seq_len: int = 1024
    cond_dim: int = 64
    depth_dim: int = 32
    depth_layers: int = 1

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout {self.layout!r} is not one of {LAYOUTS}")
        if self.layout == "depth" and self.num_codebooks < 2:
            raise ValueError("the depth layout needs at least two codebooks")

    @property
    def eos(self) -> int:
        return self.codebook_size

    @property
    def bos(self) -> int:
        return self.codebook_size + 1

    @property
    def pad(self) -> int:
        return self.codebook_size + 2


class DepthDecoder(nn.Module):
    """Per-frame transformer predicting codebooks 1..K-1 from the backbone state and code 0.

    Every request's frame has the same K positions, so a batch decodes them in lockstep: one
    forward per codebook for all rows (batch-invariant arithmetic, ``Decoder(invariant=True)``).
    """

    def __init__(self, config: ARConfig):
        super().__init__()
        k, d = config.num_codebooks, config.depth_dim
        self.proj = nn.Linear(config.dim, d)
        self.embed = nn.ModuleList(nn.Embedding(config.codebook_size, d) for _ in range(k - 1))
        self.decoder = Decoder(TransformerConfig(dim=d, layers=config.depth_layers, heads=2, max_seq_len=k))
        self.heads = nn.ModuleList(nn.Linear(d, config.codebook_size) for _ in range(k - 1))

    def generate(self, hidden: torch.Tensor, first: torch.Tensor, pick: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """``hidden`` ``[B, dim]`` and codebook-0 codes ``[B]`` -> the frames ``[B, K]``;
        ``pick`` samples ``[B, V]`` logits into ``[B]`` codes, each row with its own request's sampler."""
        cache = self.decoder.new_cache(batch=hidden.shape[0])
        x = torch.stack([rows_linear(self.proj, hidden), self.embed[0](first)], dim=1)
        codes = [first]
        for i, head in enumerate(self.heads):
            out = self.decoder(x, cache, invariant=True)[:, -1]
            code = pick(rows_linear(head, out))
            codes.append(code)
            if i + 1 < len(self.heads):
                x = self.embed[i + 1](code)[:, None]
        return torch.stack(codes, dim=1)


class ARModel(nn.Module):
    """The backbone with its embeddings and heads. ``shard``: this rank's slice of the backbone's
    blocks under tensor parallelism (``omni_models.common.parallel``; embeddings, heads and the
    depth transformer stay whole, and run on rank 0 only: ``omni_models.common.tp_engine``)."""

    kv_pool_type: type | None = None
    """The KV pool class the running batch uses (rank 0 of a TP group: one that its followers mirror)."""

    def __init__(self, config: ARConfig, shard: Shard | None = None):
        super().__init__()
        self.config = config
        k, v, d = config.num_codebooks, config.codebook_size, config.dim
        self.text_embed = nn.Embedding(config.text_vocab, d)
        self.cond_proj = nn.Linear(config.cond_dim, d)
        self.voices = nn.Embedding(len(VOICES), config.cond_dim)
        # All codebooks' input embeddings in one table, codebook i at rows i * (V + 3) ...
        self.audio_embed = nn.Embedding(k * (v + 3), d)
        self.register_buffer("code_offsets", torch.arange(k)[:, None] * (v + 3), persistent=False)
        self.decoder = Decoder(TransformerConfig(dim=d, layers=config.layers, heads=config.heads, max_seq_len=config.max_seq_len), shard)
        # One fused projection for all codebook heads ([K * (V + 1)] outputs; codebook 0 only in
        # the depth layout): one matmul per step instead of K.
        self.num_heads = 1 if config.layout == "depth" else k
        self.heads = nn.Linear(d, self.num_heads * (v + 1))
        self.depth = DepthDecoder(config) if config.layout == "depth" else None

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """``[B, dim]`` -> ``[B, num_heads, V + 1]`` (batch-invariant rows)."""
        return rows_linear(self.heads, hidden).view(-1, self.num_heads, self.config.codebook_size + 1)

    def voice(self, index: int) -> torch.Tensor:
        """Conditioning vector of a preset voice (models without a speaker encoder)."""
        return self.voices.weight[index]

    def embed_frames(self, codes: torch.Tensor) -> torch.Tensor:
        """``[K, T]`` code ids -> ``[T, dim]`` (sum over codebooks); ``T`` may be a batch's rows."""
        return self.audio_embed(codes + self.code_offsets).sum(dim=0)

    def prompt(self, text_ids: list[int], cond: torch.Tensor | None, prompt_codes: torch.Tensor | None = None) -> torch.Tensor:
        """``[1, T, dim]``: conditioning vector, text, reference codes, then a BOS frame."""
        device = self.text_embed.weight.device
        parts = []
        if cond is not None:
            parts.append(self.cond_proj(cond.to(device))[None])
        parts.append(self.text_embed(torch.tensor(text_ids, device=device)))
        if prompt_codes is not None and prompt_codes.numel():
            parts.append(self.embed_frames(prompt_codes.to(device)))
        bos = torch.full((self.config.num_codebooks, 1), self.config.bos, device=device)
        parts.append(self.embed_frames(bos))
        return torch.cat(parts)[None]


def check_context(prompt_len: int, new_positions: int, max_seq_len: int) -> None:
    """Refuse up front, before any audio streams, a request that cannot fit the KV cache."""
    if prompt_len + new_positions > max_seq_len:
        raise ValueError(
            f"a prompt of {prompt_len} positions plus up to {new_positions} generated ones exceeds the model's "
            f"context of {max_seq_len}; shorten the text or the reference audio"
        )


def new_positions(config: ARConfig, limits: GenerationLimits) -> int:
    """Cache positions a request may add after its prompt (the delay pattern runs K-1 steps past its frames)."""
    return limits.max_new_tokens + (config.num_codebooks - 1 if config.layout == "delay" else 0)


class FrameState:
    """One request's progress through its layout: when EOS may end it, the delay pattern, its limits.

    ``accept(row)`` takes the codes sampled for one step (plain ints, codebook 0 first) and
    returns the aligned frame it completes (or None), whether the request is finished, and the
    step row to feed back (the delay pattern rewrites BOS and PAD into it).
    """

    def __init__(self, config: ARConfig, limits: GenerationLimits):
        self.config, self.limits = config, limits
        self.aligner = DelayAligner(config.num_codebooks) if config.layout == "delay" else None
        self.n_frames: int | None = None
        self.step = 0
        self.emitted = 0

    @property
    def allow_eos(self) -> bool:
        return self.n_frames is None and self.step >= self.limits.min_new_tokens

    def ends_at(self, code0: int) -> bool:
        """Whether codebook 0's code ends the request before the rest of its frame is decoded."""
        return self.aligner is None and code0 == self.config.eos

    def accept(self, row: list[int]) -> tuple[list[int] | None, bool, list[int]]:
        c = self.config
        if self.aligner is None:
            if row[0] == c.eos:
                return None, True, row
            self.emitted += 1
            self.step += 1
            return row, self.emitted >= self.limits.max_new_tokens, row
        # Delay pattern: codebook i at this step belongs to frame step - i.
        step = self.step
        row = [c.bos if step < i else c.pad if self.n_frames is not None and step - i >= self.n_frames else code for i, code in enumerate(row)]
        if self.n_frames is None and row[0] == c.eos:
            self.n_frames = step
        elif self.n_frames is None and step + 1 >= self.limits.max_new_tokens:
            self.n_frames = step + 1
        frame = self.aligner.push(row)
        emit = frame is not None and (self.n_frames is None or self.emitted < self.n_frames)
        if emit:
            self.emitted += 1
        self.step += 1
        done = self.n_frames is not None and self.emitted >= self.n_frames
        return (frame if emit else None), done, row
