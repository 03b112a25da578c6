"""Log-mel spectrogram features (front end of speaker encoders and the CosyVoice3 flow)."""

from __future__ import annotations

import math

import torch
from torch import nn


def _hz_to_mel(hz: torch.Tensor) -> torch.Tensor:
    return 2595.0 * torch.log10(1.0 + hz / 700.0)


def _mel_to_hz(mel: torch.Tensor) -> torch.Tensor:
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


def mel_filterbank(sample_rate: int, n_fft: int, n_mels: int) -> torch.Tensor:
    """Triangular HTK-mel filters ``[n_mels, n_fft // 2 + 1]``."""
    freqs = torch.linspace(0, sample_rate / 2, n_fft // 2 + 1)
    edges = _mel_to_hz(torch.linspace(0.0, float(_hz_to_mel(torch.tensor(sample_rate / 2.0))), n_mels + 2))
    lower, center, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (freqs[None] - lower) / (center - lower)
    falling = (upper - freqs[None]) / (upper - center)
    return torch.clamp(torch.minimum(rising, falling), min=0.0)


class LogMel(nn.Module):
    """``[samples]`` -> ``[n_mels, frames]`` log-mel; no learned weights (buffers only)."""

    def __init__(self, sample_rate: int = 16000, n_fft: int = 512, hop: int = 160, n_mels: int = 40):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft), persistent=False)
        self.register_buffer("filters", mel_filterbank(sample_rate, n_fft, n_mels), persistent=False)

    def forward(self, wave_: torch.Tensor) -> torch.Tensor:
        if wave_.shape[-1] < self.n_fft:
            wave_ = torch.nn.functional.pad(wave_, (0, self.n_fft - wave_.shape[-1]))
        spec = torch.stft(wave_, self.n_fft, self.hop, window=self.window, return_complex=True).abs() ** 2
        return torch.log(self.filters @ spec + 1e-6) / math.log(10.0)
