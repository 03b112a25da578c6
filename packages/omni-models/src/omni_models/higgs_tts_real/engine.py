"""Higgs-TTS generation under omni's continuous batching: one batched backbone step per decode
step across requests, each request in its own KV slot (``omni_models.common.scheduler``).

The prompt (``prompt_ids`` + ``prompt_embeds``): ``<|tts|> [<|ref_text|> ref] <|ref_audio|>
[ref rows] <|text|> text <|audio|>`` where the reference rows are the reference codes in the
delay pattern (``T + N - 1`` rows, BOC before a codebook starts and EOC after it ends), each
embedded as the sum of its codebooks' rows; without reference audio ``<|tts|> <|text|> text
<|audio|>``. The hidden state at ``<|audio|>`` gives the first row's logits.

One decode step samples a delayed row ``[N]`` (codebook ``c`` of frame ``step - c``) per
request and feeds it back as the next input. The state machine (``HiggsRowState``) is the
published sampler's: during the first ``N`` steps the codebooks not yet started are forced to
BOC; after that, EOC in codebook 0 starts a wind-down of ``N - 2`` more steps (the finer
codebooks still finish the last frames), and the request ends after it; ``max_new_tokens``
rows cap it. Aligned frames are handed to the vocoder as soon as a row completes one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from omni_models.common.batch import KVPool, Row, RowAttention, SpanBatch, StepResult, span_for
from omni_models.common.delay import DelayAligner, apply_delay
from omni_models.common.limits import GenerationLimits
from omni_models.common.sampling import GumbelNoise, SamplingParams, sample_rows

from .backbone import HiggsBackbone

#: Placeholder id in ``prompt_ids`` for one reference-audio row (the published ``audio_token_id``).
AUDIO_PLACEHOLDER = -100


@dataclass(frozen=True)
class HiggsSamplingParams(SamplingParams):
    """The published sampler's knobs: temperature, then top-k, then top-p (nucleus) per codebook."""

    top_p: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


def nucleus(logits: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
    """``logits`` ``[B, N, V]`` with the codes outside each sampled row's nucleus set to -inf:
    tempered, top-k filtered, then the smallest set of codes whose probability reaches ``top_p``
    (the most likely code always stays). Row by row, so no row depends on the others."""
    rows = [i for i, p in enumerate(params) if p.temperature > 0 and getattr(p, "top_p", 1.0) < 1.0]
    for i in rows:
        p = params[i]
        tempered = logits[i] / p.temperature
        if p.top_k and p.top_k < tempered.shape[-1]:
            kth = tempered.topk(p.top_k, dim=-1).values[:, -1:]
            tempered = tempered.masked_fill(tempered < kth, float("-inf"))
        ordered, order = tempered.sort(dim=-1, descending=True)
        beyond = ordered.softmax(dim=-1).cumsum(dim=-1) > p.top_p  # type: ignore[attr-defined]
        beyond[:, 1:] = beyond[:, :-1].clone()
        beyond[:, 0] = False
        logits[i] = logits[i].masked_fill(torch.zeros_like(beyond).scatter(-1, order, beyond), float("-inf"))
    return logits


@dataclass(frozen=True)
class HiggsEngineConfig:
    """What the scheduler reads of its batch's model (``config.max_seq_len``)."""

    max_seq_len: int
    num_codebooks: int


@dataclass(frozen=True)
class CacheShape:
    """``KVPool``'s view of the backbone: key/value heads, not query heads."""

    layers: int
    heads: int
    head_dim: int


class HiggsRowState:
    """One request's delay / end-of-codes state (see the module docstring)."""

    def __init__(self, num_codebooks: int, boc: int, eoc: int, max_rows: int):
        self.n, self.boc, self.eoc, self.max_rows = num_codebooks, boc, eoc, max_rows
        self.delay = 0
        self.countdown: int | None = None
        self.rows = 0
        self.aligner = DelayAligner(num_codebooks)

    def accept(self, row: list[int]) -> tuple[list[int] | None, bool, list[int]]:
        """The sampled row -> (the aligned frame it completes, finished, the row to feed back)."""
        done = False
        if self.delay < self.n:
            row = [code if c <= self.delay else self.boc for c, code in enumerate(row)]
            self.delay += 1
        elif self.countdown is not None:
            self.countdown -= 1
            done = self.countdown <= 0
        elif row[0] == self.eoc:
            if self.n <= 2:
                done = True
            else:
                self.countdown = self.n - 2
        self.rows += 1
        frame = self.aligner.push(row)
        return frame, done or self.rows >= self.max_rows, row


class _Prefill:
    """Attention for a prompt written into one request's slot from position 0."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        self.keys, self.values = keys, values

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        t = k.shape[2]
        self.keys[layer, :, :, :t] = k
        self.values[layer, :, :, :t] = v
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=q.shape[1] != k.shape[1])


class HiggsBatch(SpanBatch):
    """The running requests of one Higgs backbone (``StepScheduler(None, batch=...)``'s batch)."""

    def __init__(self, model: HiggsBackbone, max_seq_len: int | None = None):
        self.model = model
        shape = model.shape
        self.config = HiggsEngineConfig(min(max_seq_len or shape.max_positions, shape.max_positions), model.audio.num_codebooks)
        self.cache_shape = CacheShape(shape.layers, shape.kv_heads, shape.head_dim)
        param = model.text_embedding.weight
        self.device, self.dtype = param.device, param.dtype
        super().__init__(lambda span: KVPool(self.cache_shape, span, self.device, self.dtype))  # type: ignore[arg-type]

    # prompt ------------------------------------------------------------------------------
    @torch.inference_mode()
    def prompt(self, ids: list[int], ref_codes: torch.Tensor | None) -> torch.Tensor:
        """``[1, T, hidden]`` input embeddings; ``ref_codes`` ``[N, T_ref]`` fill the placeholders."""
        audio = self.model.audio
        ids_t = torch.tensor(ids, dtype=torch.long, device=self.device)
        slots = (ids_t == AUDIO_PLACEHOLDER).nonzero().flatten()
        embeds = self.model.embed_text(ids_t.clamp(min=0))
        if slots.numel():
            if ref_codes is None:
                raise ValueError("the prompt has reference-audio placeholders but no reference codes")
            delayed = apply_delay(ref_codes.to(self.device, torch.long), bos=audio.boc, pad=audio.eoc).T
            if delayed.shape[0] != slots.numel():
                raise ValueError(f"{slots.numel()} reference placeholders for {delayed.shape[0]} delayed reference rows")
            embeds[slots] = self.model.embed_audio(delayed).to(embeds.dtype)
        return embeds[None]

    # the scheduler's interface ------------------------------------------------------------------
    def check_prompt(self, prompt: torch.Tensor) -> None:
        if prompt.dim() != 3 or prompt.shape[0] != 1 or prompt.shape[2] != self.model.shape.hidden:
            raise ValueError(f"prompt must be [1, T, {self.model.shape.hidden}], got {tuple(prompt.shape)}")

    def reserve(self, prompt_len: int, limits: GenerationLimits) -> int:
        need = prompt_len + limits.max_new_tokens
        if need > self.config.max_seq_len:
            raise ValueError(
                f"a prompt of {prompt_len} positions plus up to {limits.max_new_tokens} generated rows exceeds the "
                f"engine's context of {self.config.max_seq_len}; shorten the text or the reference audio, or lower max_new_tokens"
            )
        return span_for(prompt_len, limits.max_new_tokens, self.config.max_seq_len)

    def join(self, owner: Any, prompt: torch.Tensor, limits: GenerationLimits, params: SamplingParams, generator: torch.Generator) -> Row:
        self.check_prompt(prompt)
        span = self.reserve(prompt.shape[1], limits)
        audio = self.model.audio
        row = Row(owner, HiggsRowState(audio.num_codebooks, audio.boc, audio.eoc, limits.max_new_tokens), params, GumbelNoise(generator), span)
        view = self._slot(row)
        try:
            t = prompt.shape[1]
            hidden = self.model.run(prompt.to(self.device, self.dtype), torch.arange(t, device=self.device), _Prefill(view.keys, view.values).attend, invariant=False)
            row.hidden = hidden[0, -1]
        except BaseException:
            row.pool.remove(row)  # type: ignore[union-attr]
            raise
        row.position = prompt.shape[1]
        self.rows[owner] = row
        return row

    @torch.inference_mode()
    def step(self) -> list[StepResult]:
        """One row for every running request (one batched head + sampling), then one batched
        backbone step for those that continue."""
        if not self.rows:
            return []
        _, rows = self._ordered()
        logits = nucleus(self.model.audio_logits(torch.stack([r.hidden for r in rows])), [r.params for r in rows])
        codes = sample_rows(logits, [r.params for r in rows], [r.noise for r in rows])
        results, feed = self._settle(rows, codes)
        if feed:
            self._advance(feed)
        return results

    def _advance(self, feed: dict[Row, list[int]]) -> None:
        pools, rows = self._ordered()
        x = self.model.embed_audio(torch.tensor([feed[r] for r in rows], device=self.device)).to(self.dtype)
        positions = torch.tensor([r.position for r in rows], device=self.device)
        hidden = self.model.run(x[:, None], positions[:, None], RowAttention(pools, positions).attend, invariant=True)[:, 0]
        for i, row in enumerate(rows):
            row.hidden = hidden[i]
            row.position += 1
