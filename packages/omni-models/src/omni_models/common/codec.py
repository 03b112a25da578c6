"""Neural audio codec: residual VQ, a causal encoder and a streaming causal decoder.

The decoder turns frame latents into waveform samples: causal convolutions at the frame rate,
transposed convolutions whose strides multiply to the hop length (kernel = stride, so frames
never overlap), and a causal output convolution with ``tanh``. Every output sample therefore
depends on a bounded number of past frames (``context_frames``), which is what makes chunked
streaming decoding produce exactly the samples of a full decode. The same decoder with a mel
input is the HiFi-GAN-shaped vocoder of CosyVoice3; with continuous latents it is Ming's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


def upsample_factors(hop: int, max_factor: int = 10) -> tuple[int, ...]:
    """Split ``hop`` into at most four strides, each <= ``max_factor`` where possible."""
    primes: list[int] = []
    n, p = hop, 2
    while n > 1:
        while n % p == 0:
            primes.append(p)
            n //= p
        p += 1
    factors: list[int] = []
    for prime in sorted(primes, reverse=True):
        for i, f in enumerate(factors):
            if f * prime <= max_factor:
                factors[i] = f * prime
                break
        else:
            factors.append(prime)
    while len(factors) > 4:
        factors.sort()
        factors = [factors[0] * factors[1], *factors[2:]]
    return tuple(sorted(factors, reverse=True))


class CausalConv1d(nn.Conv1d):
    """Conv1d padded on the left only: output ``t`` sees inputs ``<= t``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        left = (self.kernel_size[0] - 1) * self.dilation[0]
        return super().forward(F.pad(x, (left, 0)))


@dataclass(frozen=True)
class CodecConfig:
    sample_rate: int
    hop: int
    channels: int = 1
    latent_dim: int = 64
    num_codebooks: int = 8
    codebook_size: int = 1024
    width: int = 64

    @property
    def frame_rate(self) -> float:
        return self.sample_rate / self.hop


class ResidualVQ(nn.Module):
    """``K`` codebooks; a frame's latent is the sum of its codes' vectors."""

    def __init__(self, num_codebooks: int, codebook_size: int, dim: int):
        super().__init__()
        self.codebooks = nn.ModuleList(nn.Embedding(codebook_size, dim) for _ in range(num_codebooks))

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """``[K, T]`` -> ``[dim, T]``."""
        if codes.dim() != 2 or codes.shape[0] != len(self.codebooks):
            raise ValueError(f"expected codes [{len(self.codebooks)}, T], got {tuple(codes.shape)}")
        return sum(book(codes[i]) for i, book in enumerate(self.codebooks)).T

    def encode(self, latents: torch.Tensor) -> torch.Tensor:
        """``[dim, T]`` -> ``[K, T]`` by greedy residual nearest-neighbour search."""
        residual = latents.T
        codes = []
        for book in self.codebooks:
            idx = torch.cdist(residual, book.weight).argmin(dim=-1)
            codes.append(idx)
            residual = residual - book(idx)
        return torch.stack(codes)


class CodecDecoder(nn.Module):
    """Latents ``[in_dim, T]`` -> audio ``[channels, T * hop]`` in [-1, 1]."""

    def __init__(self, in_dim: int, hop: int, out_channels: int, width: int = 64):
        super().__init__()
        self.hop = hop
        self.out_channels = out_channels
        self.pre = nn.ModuleList([CausalConv1d(in_dim, width, 3), CausalConv1d(width, width, 3)])
        ups, c = [], width
        for f in upsample_factors(hop):
            nxt = max(8, c // 2)
            ups.append(nn.ConvTranspose1d(c, nxt, kernel_size=f, stride=f))
            c = nxt
        self.ups = nn.ModuleList(ups)
        self.post = CausalConv1d(c, out_channels, 7)
        # Frames a new frame's samples depend on: 2 per frame-rate conv, 1 for the output conv.
        self.context_frames = 2 * len(self.pre) + 1

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        """``[in_dim, T]`` -> ``[channels, T * hop]``, or a batch ``[B, in_dim, T]`` -> ``[B, channels, T * hop]``."""
        x = latents[None] if latents.dim() == 2 else latents
        for conv in self.pre:
            x = F.elu(conv(x))
        for up in self.ups:
            x = F.elu(up(x))
        out = torch.tanh(self.post(x))
        return out[0] if latents.dim() == 2 else out


class CodecEncoder(nn.Module):
    """Audio ``[samples]`` -> latents ``[latent_dim, samples // hop]`` (causal, strided)."""

    def __init__(self, hop: int, latent_dim: int, width: int = 64):
        super().__init__()
        self.hop = hop
        downs, c = [], 8
        self.pre = CausalConv1d(1, c, 7)
        for f in reversed(upsample_factors(hop)):
            nxt = min(width, c * 2)
            downs.append(nn.Conv1d(c, nxt, kernel_size=f, stride=f))
            c = nxt
        self.downs = nn.ModuleList(downs)
        self.post = nn.Conv1d(c, latent_dim, 1)

    def forward(self, wave_: torch.Tensor) -> torch.Tensor:
        frames = wave_.shape[-1] // self.hop
        if frames == 0:
            raise ValueError(f"reference audio of {wave_.shape[-1]} samples is shorter than one codec frame ({self.hop} samples)")
        x = F.elu(self.pre(wave_[None, None, : frames * self.hop]))
        for down in self.downs:
            x = F.elu(down(x))
        return self.post(x)[0]


class StreamingDecode:
    """Chunked decoding that equals a full decode: each chunk is decoded with the previous
    ``context_frames`` latents prepended and their samples dropped.

    The context is this request's own; ``run`` (default: the decoder) may decode the chunk
    together with other requests' chunks (``CodecVocoder`` batches them)."""

    def __init__(self, decoder: CodecDecoder, run: Callable[[torch.Tensor], torch.Tensor] | None = None):
        self.decoder = decoder
        self.run = run or decoder
        self.context: torch.Tensor | None = None

    @torch.inference_mode()
    def push(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents ``[dim, n]`` -> audio ``[channels, n * hop]``."""
        n = latents.shape[-1]
        full = latents if self.context is None else torch.cat([self.context, latents], dim=-1)
        audio = self.run(full)[:, -n * self.decoder.hop :] if n else full.new_zeros(self.decoder.out_channels, 0)
        keep = self.decoder.context_frames
        self.context = full[:, -keep:] if keep else None
        return audio
