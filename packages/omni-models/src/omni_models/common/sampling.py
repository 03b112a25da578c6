"""Seeded sampling, so that a request's audio is a pure function of weights, text and seed."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch


def stable_seed(*parts: object) -> int:
    """A 63-bit seed from the parts' text, identical across processes (unlike ``hash``)."""
    digest = hashlib.blake2b("\x1f".join(repr(p) for p in parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def request_seed(data: dict) -> int:
    """A request's sampling seed: its ``seed`` field when given, else a hash of text and voice,
    so that the same request always yields the same audio."""
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
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


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> torch.Tensor:
    """Sample ids from ``logits`` ``[..., vocab]``; temperature 0 is greedy. Returns ``[...]``."""
    return sample_rows(logits[None], [params], [generator])[0]


def sample_rows(logits: torch.Tensor, params: Sequence[SamplingParams], generators: Sequence[torch.Generator]) -> torch.Tensor:
    """Sample row ``i`` of ``logits`` ``[B, ..., vocab]`` with ``params[i]`` and ``generators[i]``.

    Top-k, then the Gumbel-max trick over the k survivors (one small uniform draw from the
    request's own generator), which is exact categorical sampling and cheap per step. A row's
    draws and arithmetic do not depend on the other rows: its uniforms have its own shape
    ``[..., k]`` and their Gumbel transform runs on that tensor alone (vectorised maths kernels
    can round a tensor's tail differently, so no element's result may depend on where it sits
    in a batch); the batched operations around it (division, top-k, argmax) are exact per row.
    Returns ``[B, ...]``.
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
    noise = torch.full(values.shape, float("-inf"))
    for j, (i, k) in enumerate(zip(sampled, ks)):
        uniform = torch.rand((*values.shape[1:-1], k), generator=generators[i]).clamp_(1e-10, 1.0 - 1e-7)
        noise[j, ..., :k] = uniform.log_().neg_().log_().neg_()
    choice = (values + noise.to(values.device)).argmax(dim=-1, keepdim=True)
    chosen = indices.gather(-1, choice).squeeze(-1)
    if len(sampled) == len(params):
        return chosen
    picks[sampled] = chosen
    return picks
