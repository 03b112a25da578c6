"""The reference side of the Higgs-TTS parity tests, and drivers for omni's side.

No public package implements the ``bosonai/higgs-tts-3-4b`` generation loop on the CPU (the
published one runs inside sglang on CUDA), so ``reference_generate`` drives transformers'
``Qwen3Model`` (the backbone's reference implementation, its own KV cache) with the published
fused audio head (``F.linear(hidden, embedding).view(N, V)``) and the published sampler's
delay / EOC rules, greedily. It shares no code with omni's engine.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from omni_models.common.limits import GenerationLimits
from omni_models.common.sampling import SamplingParams, generator_for

AUDIO_PLACEHOLDER = -100


def reference_delay(codes_nt: torch.Tensor, boc: int, eoc: int) -> torch.Tensor:
    """``[N, T]`` -> ``[T + N - 1, N]`` rows: BOC before a codebook starts, EOC after it ends."""
    n, t = codes_nt.shape
    out = torch.full((t + n - 1, n), eoc, dtype=torch.long)
    for c in range(n):
        out[:c, c] = boc
        out[c : c + t, c] = codes_nt[c]
    return out


def reference_undelay(rows: torch.Tensor) -> torch.Tensor:
    """``[L, N]`` delayed rows -> ``[N, L - N + 1]`` frames."""
    length, n = rows.shape
    t = length - n + 1
    return torch.stack([rows[c : c + t, c] for c in range(n)]) if t > 0 else torch.zeros(n, 0, dtype=torch.long)


@torch.inference_mode()
def reference_embeds(qwen: Any, audio_embedding: torch.Tensor, ids: list[int], ref_codes: torch.Tensor | None, n: int, vocab: int) -> torch.Tensor:
    ids_t = torch.tensor(ids)
    x = qwen.embed_tokens(ids_t.clamp(min=0))
    slots = (ids_t == AUDIO_PLACEHOLDER).nonzero().flatten()
    if slots.numel():
        rows = reference_delay(ref_codes, vocab - 2, vocab - 1)
        x[slots] = audio_embedding[rows + torch.arange(n) * vocab].sum(dim=1)
    return x


@torch.inference_mode()
def reference_generate(qwen: Any, audio_embedding: torch.Tensor, ids: list[int], ref_codes: torch.Tensor | None, *, n: int, vocab: int, max_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy codes ``[N, T]`` and the first row's logits ``[N, V]``."""
    boc, eoc = vocab - 2, vocab - 1
    offsets = torch.arange(n) * vocab
    out = qwen(inputs_embeds=reference_embeds(qwen, audio_embedding, ids, ref_codes, n, vocab)[None], use_cache=True)
    cache, hidden = out.past_key_values, out.last_hidden_state[0, -1]
    rows, delay, countdown, first = [], 0, None, None
    while True:
        logits = F.linear(hidden, audio_embedding).view(n, vocab)
        first = logits if first is None else first
        codes = logits.argmax(dim=-1)
        done = False
        if delay < n:
            codes[delay + 1 :] = boc
            delay += 1
        elif countdown is not None:
            countdown -= 1
            done = countdown <= 0
        elif int(codes[0]) == eoc:
            done = n <= 2
            countdown = None if done else n - 2
        rows.append(codes)
        if done or len(rows) >= max_rows:
            break
        step = audio_embedding[codes + offsets].sum(dim=0)
        out = qwen(inputs_embeds=step[None, None], past_key_values=cache, use_cache=True)
        cache, hidden = out.past_key_values, out.last_hidden_state[0, -1]
    return reference_undelay(torch.stack(rows)), first


@dataclass
class Payload:
    """The part of ``StagePayload`` the stages read (``data``), replaced with ``dataclasses.replace``."""

    data: dict[str, Any]


@dataclass
class Collect:
    """A stage context that records what a stage emits."""

    cancelled: bool = False
    deadline: float | None = None
    chunks: list[dict[str, Any]] = field(default_factory=list)
    upstream_payload: Any = None

    def emit(self, chunk: dict[str, Any]) -> None:
        self.chunks.append(chunk)


def omni_batch_codes(engine: Any, prompts: list[torch.Tensor], limits: list[GenerationLimits]) -> list[torch.Tensor]:
    """Submit every prompt into the engine's running batch before its scheduler admits any (so they
    decode together), then collect each request's frames ``[N, T]``."""
    scheduler = engine.scheduler
    with scheduler._cond:  # the scheduler admits only after every request is waiting: one batch
        streams = [
            scheduler.submit(p, lim, SamplingParams(0.0, 0), generator_for(0, i, "parity"))
            for i, (p, lim) in enumerate(zip(prompts, limits))
        ]
    results: list[torch.Tensor | None] = [None] * len(streams)

    def take(i: int) -> None:
        frames = list(streams[i])
        results[i] = torch.stack(frames, dim=1) if frames else torch.zeros(0, 0, dtype=torch.long)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]
