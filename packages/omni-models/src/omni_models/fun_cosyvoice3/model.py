"""CosyVoice3's token-to-mel flow: speech tokens are embedded, upsampled to the 50 Hz mel rate
(2 mel frames per token), projected to ``mu`` and, with the speaker embedding, condition a
flow-matching estimator that turns Gaussian noise into an 80-bin mel spectrogram."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from omni_models.common.flow import FlowEstimator, NoiseStream


@dataclass(frozen=True)
class TokenFlowConfig:
    vocab: int = 6561
    token_dim: int = 64
    n_mels: int = 80
    speaker_dim: int = 64
    token_mel_ratio: int = 2
    steps: int = 4


class TokenFlow(nn.Module):
    def __init__(self, config: TokenFlowConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab, config.token_dim)
        self.encoder = nn.Linear(config.token_dim, config.n_mels)
        self.speaker = nn.Linear(config.speaker_dim, config.n_mels)
        self.estimator = FlowEstimator(config.n_mels, 2 * config.n_mels)

    @torch.inference_mode()
    def forward(self, tokens: torch.Tensor, speaker: torch.Tensor, noise: NoiseStream) -> torch.Tensor:
        """``tokens`` ``[1, n]`` -> mel ``[n_mels, n * token_mel_ratio]``."""
        c = self.config
        mu = self.encoder(self.embed(tokens[0])).repeat_interleave(c.token_mel_ratio, dim=0)
        cond = torch.cat([mu, self.speaker(speaker.to(mu.device)).expand_as(mu)], dim=-1)
        mel = self.estimator.solve(cond, noise.take(mu.shape[0]).to(mu.device), c.steps)
        return mel.T


def build_token_flow(config: TokenFlowConfig) -> nn.Module:
    return TokenFlow(config)
