"""Conditional flow matching: the continuous-output head of CosyVoice3 (tokens -> mel) and of
Ming (AR hidden state -> audio latent patch).

An estimator predicts the velocity ``v(x_t, t | cond)``; sampling integrates it from Gaussian
noise at ``t = 0`` to data at ``t = 1`` with a fixed number of Euler steps. The estimator is
per frame, and the noise comes from a ``NoiseStream`` drawn in fixed blocks, so chunked
(streaming) solving gives exactly the frames of a one-shot solve.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class FlowEstimator(nn.Module):
    def __init__(self, dim: int, cond_dim: int, hidden: int = 128):
        super().__init__()
        self.dim = dim
        self.time = nn.Linear(16, hidden)
        self.inp = nn.Linear(dim + cond_dim, hidden)
        self.mid = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor, t: float, cond: torch.Tensor) -> torch.Tensor:
        """``x`` ``[T, dim]``, ``cond`` ``[T, cond_dim]`` -> velocity ``[T, dim]``."""
        freqs = torch.exp(torch.arange(8, dtype=x.dtype, device=x.device) * (-math.log(1000.0) / 8))
        temb = torch.cat([torch.sin(t * 1000.0 * freqs), torch.cos(t * 1000.0 * freqs)])
        h = torch.nn.functional.silu(self.inp(torch.cat([x, cond], dim=-1)) + self.time(temb))
        return self.out(torch.nn.functional.silu(self.mid(h)))

    @torch.inference_mode()
    def solve(self, cond: torch.Tensor, noise: torch.Tensor, steps: int) -> torch.Tensor:
        x = noise
        for i in range(steps):
            x = x + self(x, i / steps, cond) / steps
        return x


class NoiseStream:
    """Gaussian noise ``[n, dim]`` drawn in fixed blocks so any chunking yields the same rows."""

    BLOCK = 64

    def __init__(self, generator: torch.Generator, dim: int):
        self.generator = generator
        self.dim = dim
        self.buffer = torch.empty(0, dim)

    def take(self, n: int) -> torch.Tensor:
        while self.buffer.shape[0] < n:
            block = torch.randn(self.BLOCK, self.dim, generator=self.generator)
            self.buffer = torch.cat([self.buffer, block])
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out
