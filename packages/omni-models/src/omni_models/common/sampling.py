"""Seeded sampling, so that a request's audio is a pure function of weights, text and seed."""

from __future__ import annotations

import hashlib
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


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> torch.Tensor:
    """Sample ids from ``logits`` ``[..., vocab]``; temperature 0 is greedy. Returns ``[...]``.

    Top-k, then the Gumbel-max trick over the k survivors (one small uniform draw from the
    request's generator), which is exact categorical sampling and cheap per step.
    """
    if params.temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / params.temperature
    k = min(params.top_k or logits.shape[-1], logits.shape[-1])
    values, indices = torch.topk(logits, k, dim=-1)
    uniform = torch.rand(values.shape, generator=generator).clamp_(1e-10, 1.0 - 1e-7).to(values.device)
    choice = (values - torch.log(-torch.log(uniform))).argmax(dim=-1, keepdim=True)
    return indices.gather(-1, choice).squeeze(-1)
