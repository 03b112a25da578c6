"""Ming's continuous-latent AR model.

Instead of codebook logits, each step's hidden state conditions a flow-matching head that
samples the next frame's audio latent (``latent_dim`` values), and a stop head decides the end
of speech. The prompt is the speaker embedding, the text tokens and the reference's latents.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from omni_models.common.ar import check_context
from omni_models.common.flow import FlowEstimator, NoiseStream
from omni_models.common.limits import GenerationLimits
from omni_models.common.transformer import Decoder, TransformerConfig


@dataclass(frozen=True)
class LatentARConfig:
    latent_dim: int = 32
    text_vocab: int = 259
    dim: int = 64
    layers: int = 2
    heads: int = 4
    max_seq_len: int = 2048
    cond_dim: int = 64
    flow_steps: int = 4


class LatentARModel(nn.Module):
    def __init__(self, config: LatentARConfig):
        super().__init__()
        self.config = config
        self.text_embed = nn.Embedding(config.text_vocab, config.dim)
        self.cond_proj = nn.Linear(config.cond_dim, config.dim)
        self.latent_in = nn.Linear(config.latent_dim, config.dim)
        self.bos = nn.Parameter(torch.zeros(1, config.dim))
        self.decoder = Decoder(TransformerConfig(dim=config.dim, layers=config.layers, heads=config.heads, max_seq_len=config.max_seq_len))
        self.stop = nn.Linear(config.dim, 1)
        self.flow = FlowEstimator(config.latent_dim, config.dim)

    def prompt(self, text_ids: list[int], spk_emb: torch.Tensor, prompt_latent: torch.Tensor) -> torch.Tensor:
        device = self.text_embed.weight.device
        parts = [self.cond_proj(spk_emb.to(device))[None], self.text_embed(torch.tensor(text_ids, device=device))]
        if prompt_latent.numel():
            parts.append(self.latent_in(prompt_latent.to(device).T))
        parts.append(self.bos)
        return torch.cat(parts)[None]


def build_latent_ar(config: LatentARConfig) -> nn.Module:
    return LatentARModel(config)


@torch.inference_mode()
def generate_latents(
    model: LatentARModel,
    prompt: torch.Tensor,
    limits: GenerationLimits,
    noise: NoiseStream,
    cancelled: Callable[[], bool] = lambda: False,
) -> Iterator[torch.Tensor]:
    """Yield latent frames ``[latent_dim]`` until the stop head fires (after ``min_new_tokens``)
    or ``max_new_tokens`` frames."""
    check_context(prompt.shape[1], limits.max_new_tokens, model.config.max_seq_len)
    cache = model.decoder.new_cache()
    hidden = model.decoder(prompt, cache)[0, -1]
    for step in range(limits.max_new_tokens):
        if cancelled():
            return
        if step >= limits.min_new_tokens and torch.sigmoid(model.stop(hidden)).item() > 0.5:
            return
        latent = model.flow.solve(hidden[None], noise.take(1).to(hidden.device), model.config.flow_steps)[0]
        yield latent
        hidden = model.decoder(model.latent_in(latent)[None, None], cache)[0, -1]
