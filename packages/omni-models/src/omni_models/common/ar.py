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

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from .audio import VOICES
from .delay import DelayAligner
from .limits import GenerationLimits
from .sampling import SamplingParams, sample
from .transformer import Decoder, TransformerConfig

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
    """Per-frame transformer predicting codebooks 1..K-1 from the backbone state and code 0."""

    def __init__(self, config: ARConfig):
        super().__init__()
        k, d = config.num_codebooks, config.depth_dim
        self.proj = nn.Linear(config.dim, d)
        self.embed = nn.ModuleList(nn.Embedding(config.codebook_size, d) for _ in range(k - 1))
        self.decoder = Decoder(TransformerConfig(dim=d, layers=config.depth_layers, heads=2, max_seq_len=k))
        self.heads = nn.ModuleList(nn.Linear(d, config.codebook_size) for _ in range(k - 1))

    def generate(self, hidden: torch.Tensor, first: torch.Tensor, pick: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        cache = self.decoder.new_cache()
        x = torch.stack([self.proj(hidden), self.embed[0](first)])[None]
        codes = [first]
        for i in range(len(self.heads)):
            out = self.decoder(x, cache)[0, -1]
            code = pick(self.heads[i](out))
            codes.append(code)
            if i + 1 < len(self.heads):
                x = self.embed[i + 1](code)[None, None]
        return torch.stack(codes)


class ARModel(nn.Module):
    def __init__(self, config: ARConfig):
        super().__init__()
        self.config = config
        k, v, d = config.num_codebooks, config.codebook_size, config.dim
        self.text_embed = nn.Embedding(config.text_vocab, d)
        self.cond_proj = nn.Linear(config.cond_dim, d)
        self.voices = nn.Embedding(len(VOICES), config.cond_dim)
        # All codebooks' input embeddings in one table, codebook i at rows i * (V + 3) ...
        self.audio_embed = nn.Embedding(k * (v + 3), d)
        self.register_buffer("code_offsets", torch.arange(k)[:, None] * (v + 3), persistent=False)
        self.decoder = Decoder(TransformerConfig(dim=d, layers=config.layers, heads=config.heads, max_seq_len=config.max_seq_len))
        # One fused projection for all codebook heads ([K * (V + 1)] outputs; codebook 0 only in
        # the depth layout): one matmul per step instead of K.
        self.num_heads = 1 if config.layout == "depth" else k
        self.heads = nn.Linear(d, self.num_heads * (v + 1))
        self.depth = DepthDecoder(config) if config.layout == "depth" else None

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """``[dim]`` -> ``[num_heads, V + 1]``."""
        return self.heads(hidden).view(self.num_heads, self.config.codebook_size + 1)

    def voice(self, index: int) -> torch.Tensor:
        """Conditioning vector of a preset voice (models without a speaker encoder)."""
        return self.voices.weight[index]

    def embed_frames(self, codes: torch.Tensor) -> torch.Tensor:
        """``[K, T]`` code ids -> ``[T, dim]`` (sum over codebooks)."""
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


@torch.inference_mode()
def generate_frames(
    model: ARModel,
    prompt: torch.Tensor,
    limits: GenerationLimits,
    params: SamplingParams,
    generator: torch.Generator,
    cancelled: Callable[[], bool] = lambda: False,
) -> Iterator[torch.Tensor]:
    """Yield aligned frames ``[K]`` (int64) until end-of-speech after ``min_new_tokens`` or
    ``max_new_tokens`` frames. Stops early, yielding nothing more, once ``cancelled()``."""
    c = model.config
    k = c.num_codebooks
    check_context(prompt.shape[1], limits.max_new_tokens + (k - 1 if c.layout == "delay" else 0), c.max_seq_len)
    cache = model.decoder.new_cache()
    hidden = model.decoder(prompt, cache)[0, -1]
    aligner = DelayAligner(k) if c.layout == "delay" else None
    # EOS is a codebook-0 decision; other codebooks never emit it.
    eos_mask = torch.zeros(model.num_heads, c.codebook_size + 1, dtype=torch.bool, device=hidden.device)
    eos_mask[:, c.eos] = True
    eos_mask_allowed = eos_mask.clone()
    eos_mask_allowed[0, c.eos] = False

    def pick(logits: torch.Tensor) -> torch.Tensor:
        return sample(logits, params, generator)

    n_frames: int | None = None
    step = 0
    emitted = 0
    while not cancelled():
        allow_eos = n_frames is None and step >= limits.min_new_tokens
        logits = model.logits(hidden).masked_fill(eos_mask_allowed if allow_eos else eos_mask, float("-inf"))
        row = pick(logits)
        if c.layout == "depth":
            if int(row[0]) == c.eos:
                return
            row = model.depth.generate(hidden, row[0], pick)
        if aligner is None:
            if int(row[0]) == c.eos:
                return
            yield row
            emitted += 1
            if emitted >= limits.max_new_tokens:
                return
            hidden = model.decoder(model.embed_frames(row[:, None])[None], cache)[0, -1]
            step += 1
            continue
        # Delay pattern: codebook i at this step belongs to frame step - i.
        for i in range(k):
            if step < i:
                row[i] = c.bos
            elif n_frames is not None and step - i >= n_frames:
                row[i] = c.pad
        if n_frames is None and int(row[0]) == c.eos:
            n_frames = step
        elif n_frames is None and step + 1 >= limits.max_new_tokens:
            n_frames = step + 1
        frame = aligner.push(row)
        if frame is not None and (n_frames is None or emitted < n_frames):
            yield frame
            emitted += 1
        step += 1
        if n_frames is not None and emitted >= n_frames:
            return
        hidden = model.decoder(model.embed_frames(row[:, None])[None], cache)[0, -1]
