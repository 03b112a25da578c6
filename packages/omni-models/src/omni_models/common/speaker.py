"""Speaker encoder: reference recording -> fixed-size, L2-normalised voice embedding.

Shaped like the x-vector / ECAPA / CAM++ encoders TTS models use: log-mel features, a stack of
1-D convolutions, attentive statistics pooling (weighted mean and std) and a projection.
A preset voice (no reference) is a row of a learned voice table instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .audio import VOICES
from .mel import LogMel


@dataclass(frozen=True)
class SpeakerEncoderConfig:
    sample_rate: int = 16000
    n_mels: int = 40
    channels: int = 64
    embed_dim: int = 64


class SpeakerEncoder(nn.Module):
    def __init__(self, config: SpeakerEncoderConfig):
        super().__init__()
        self.config = config
        self.features = LogMel(config.sample_rate, n_mels=config.n_mels)
        c = config.channels
        self.convs = nn.Sequential(
            nn.Conv1d(config.n_mels, c, 5, padding=2), nn.ReLU(),
            nn.Conv1d(c, c, 3, padding=2, dilation=2), nn.ReLU(),
            nn.Conv1d(c, c, 3, padding=3, dilation=3), nn.ReLU(),
        )
        self.attention = nn.Conv1d(c, 1, 1)
        self.proj = nn.Linear(2 * c, config.embed_dim)
        self.voices = nn.Embedding(len(VOICES), config.embed_dim)

    def forward(self, wave_: torch.Tensor) -> torch.Tensor:
        """``[samples]`` at ``config.sample_rate`` -> ``[embed_dim]``."""
        h = self.convs(self.features(wave_)[None])[0]
        weights = torch.softmax(self.attention(h[None])[0], dim=-1)
        mean = (h * weights).sum(-1)
        std = ((h - mean[:, None]).pow(2) * weights).sum(-1).clamp_min(1e-6).sqrt()
        return nn.functional.normalize(self.proj(torch.cat([mean, std])), dim=0)

    def preset(self, index: int) -> torch.Tensor:
        return nn.functional.normalize(self.voices.weight[index], dim=0)
