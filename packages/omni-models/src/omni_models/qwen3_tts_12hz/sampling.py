"""Per-request sampling as the reference's ``generate`` does it.

Talker (codebook 0): repetition penalty over the request's earlier codebook-0 codes, the
suppressed control codes and the ``min_new_tokens`` EOS block, then greedy (``temperature`` 0)
or temperature -> top-k -> top-p -> a categorical draw. Sub-talker (codebooks 1..G-1): its own
temperature/top-k/top-p, no penalty. Each request draws from its own ``torch.Generator`` seeded
from its ``seed``, so its audio does not depend on who else is in the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampler:
    """One request's settings for one head (talker or sub-talker); ``temperature`` 0 is greedy."""

    temperature: float
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0


def penalise(logits: torch.Tensor, history: list[int], penalty: float) -> torch.Tensor:
    """The reference's repetition penalty: seen codes' logits divided by ``penalty`` (multiplied when negative)."""
    if penalty == 1.0 or not history:
        return logits
    index = torch.tensor(sorted(set(history)), device=logits.device)
    seen = logits[index]
    logits = logits.clone()
    logits[index] = torch.where(seen < 0, seen * penalty, seen / penalty)
    return logits


def draw(logits: torch.Tensor, sampler: Sampler, generator: torch.Generator | None) -> int:
    """One code from ``logits`` ``[V]`` (already penalised and masked)."""
    if sampler.greedy:
        return int(logits.argmax())
    scores = logits.float() / sampler.temperature
    if 0 < sampler.top_k < scores.shape[-1]:
        kth = torch.topk(scores, sampler.top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if sampler.top_p < 1.0:
        ordered, order = torch.sort(scores, descending=False)
        cumulative = ordered.softmax(-1).cumsum(-1)
        drop = cumulative <= 1 - sampler.top_p
        drop[-1] = False  # keep at least one
        scores = scores.masked_fill(drop.scatter(0, order, drop), float("-inf"))
    probs = scores.softmax(-1)
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))


def pick_rows(logits: torch.Tensor, samplers: list[Sampler], generators: list[torch.Generator], histories: list[list[int]] | None = None) -> torch.Tensor:
    """Row ``i`` of ``logits`` ``[B, V]`` with ``samplers[i]``; greedy rows without a penalty in one argmax."""
    out = logits.argmax(dim=-1)
    for i, sampler in enumerate(samplers):
        history = histories[i] if histories is not None else []
        if sampler.greedy and (sampler.repetition_penalty == 1.0 or not history):
            continue
        out[i] = draw(penalise(logits[i], history, sampler.repetition_penalty), sampler, generators[i])
    return out
