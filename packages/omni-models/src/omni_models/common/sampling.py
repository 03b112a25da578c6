"""Seeded sampling, so that a request's audio is a pure function of weights, text and seed."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from omni_runtime.errors import InvalidRequest


def stable_seed(*parts: object) -> int:
    """A 63-bit seed from the parts' text, identical across processes (unlike ``hash``)."""
    digest = hashlib.blake2b("\x1f".join(repr(p) for p in parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def request_seed(data: dict) -> int:
    """A request's sampling seed: its ``seed`` field when given, else a hash of text and voice,
    so that the same request always yields the same audio."""
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise InvalidRequest(f"seed must be an integer, got {seed!r}", param="seed")
    return stable_seed("seed", seed) if seed is not None else stable_seed("text", data.get("text"), data.get("voice"))


def generator_for(*parts: object) -> torch.Generator:
    """A CPU generator seeded from ``parts`` (stage seed, request seed, purpose)."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(stable_seed(*parts))
    return gen


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.8
    top_k: int = 50

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")


class GumbelNoise:
    """A request's Gumbel noise ``-log(-log(u))``, drawn from its own generator in blocks.

    Drawing a block of rows at once and transforming it as one tensor costs a few operations
    per request every ``block`` draws instead of five per draw. The block's shape depends only
    on the request, so its noise (and therefore its codes) is the same alone or in any batch.
    """

    def __init__(self, generator: torch.Generator, block: int = 64):
        self.generator = generator
        self.block = block
        self._buffers: dict[int, tuple[torch.Tensor, int]] = {}

    def take(self, rows: int, width: int) -> torch.Tensor:
        """The next ``[rows, width]`` noise values of this width's stream."""
        buffer, used = self._buffers.get(width, (None, 0))
        if buffer is None or used + rows > buffer.shape[0]:
            uniform = torch.rand((max(self.block, rows), width), generator=self.generator).clamp_(1e-10, 1.0 - 1e-7)
            buffer, used = uniform.log_().neg_().log_().neg_(), 0
        self._buffers[width] = (buffer, used + rows)
        return buffer[used : used + rows]


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> torch.Tensor:
    """Sample ids from ``logits`` ``[..., vocab]``; temperature 0 is greedy. Returns ``[...]``."""
    return sample_rows(logits[None], [params], [GumbelNoise(generator)])[0]


def sample_rows(logits: torch.Tensor, params: Sequence[SamplingParams], noises: Sequence[GumbelNoise]) -> torch.Tensor:
    """Sample row ``i`` of ``logits`` ``[B, ..., vocab]`` with ``params[i]`` and ``noises[i]``.

    Top-k, then the Gumbel-max trick over the k survivors, which is exact categorical sampling
    and cheap per step. A row's noise comes from its own request's stream (``GumbelNoise``) and
    the batched operations around it (division, top-k, argmax) are exact per row, so no row's
    result depends on the others. Returns ``[B, ...]``.
    """
    picks = logits.argmax(dim=-1)
    sampled = [i for i, p in enumerate(params) if p.temperature > 0]
    if not sampled:
        return picks
    vocab = logits.shape[-1]
    ks = [min(params[i].top_k or vocab, vocab) for i in sampled]
    rows = logits[sampled].float() if len(sampled) < len(params) else logits.float()
    temperature = torch.tensor([params[i].temperature for i in sampled], dtype=torch.float32, device=logits.device)
    rows = rows / temperature.view(-1, *([1] * (rows.dim() - 1)))
    values, indices = torch.topk(rows, max(ks), dim=-1)
    inner = values.shape[1:-1]
    count = inner.numel()
    draws = [noises[i].take(count, k).view(*inner, k) for i, k in zip(sampled, ks)]
    if len(set(ks)) > 1:  # shorter top-k rows: the columns past their k never win
        draws = [torch.cat([d, d.new_full((*inner, max(ks) - d.shape[-1]), float("-inf"))], dim=-1) for d in draws]
    noise = torch.stack(draws).to(values.device)
    chosen = indices.gather(-1, (values + noise).argmax(dim=-1, keepdim=True)).squeeze(-1)
    if len(sampled) == len(params):
        return chosen
    picks[sampled] = chosen
    return picks
