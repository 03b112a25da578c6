"""The talker's running batch: every request in its own KV-cache slot, one forward per step.

``TalkerBatch`` has the decode-batch interface ``omni_models.common.scheduler.StepScheduler``
drives (``check_prompt``/``reserve``/``join``/``leave``/``step``/``rows``), so requests join and
leave the running batch between steps under the shared continuous-batching scheduler
(``TalkerScheduler`` only swaps in this batch). A step:

1. the running rows' last hidden states -> one ``codec_head`` for all -> the reference's masks
   (control codes suppressed, EOS blocked before ``min_new_tokens``) -> per-request sampling;
2. rows that sampled EOS, or reached ``max_new_tokens`` (whose last sample the reference drops),
   leave; the others run the code predictor together (groups 1..G-1, lockstep);
3. each continuing row's next input is its frame's summed embeddings plus its next trailing text
   embedding (or ``tts_pad``), and one talker forward advances them all, each attending over its
   own slot up to its own position.

A row whose input is still open (``omni_models.qwen3_tts_12hz.append``) and that has fed every
text token it has is *held*: it neither samples nor moves. It stays in its slot, out of the step
(its position, hidden state and cache untouched), and so does a row that the scheduler lets sit
out a step (``step(only=...)``): the forward then runs over the stepping rows' slots only (the TP
followers get the slots with the inputs).

``join_many`` prefills several requests in one forward: their prompts packed end to end, the
projections over all positions at once, attention per prompt over its own positions. The codes
are those of one-at-a-time prefill (the tests check it); the packed matmuls need not add up in
the same order as a lone prompt's, so hidden states may differ in the last bits.

Slots are compact (a leaving row's slot is refilled by the last row), so the step reads
``keys[:, :n]`` as a view. The cache grows by doubling in rows and positions.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from omni_models.common.limits import GenerationLimits
from omni_models.common.slots import SlotCache

from .sampling import Sampler, pick_rows
from .talker import Talker

#: Codes the talker may never emit: the top 1024 ids of its codec vocabulary except EOS (the reference's suppress list).
SUPPRESSED_SPAN = 1024


@dataclass(frozen=True)
class BatchConfig:
    max_seq_len: int


@dataclass(frozen=True)
class TalkerJob:
    """What a request brings besides its prompt: samplers, trailing text embeddings, ``tts_pad``."""

    talker: Sampler
    sub: Sampler
    trailing: torch.Tensor  # [n, hidden]
    pad: torch.Tensor  # [hidden]
    feed: Any = None
    """An ``OpenText`` when the request's input is open (its trailing text grows); None: ``trailing`` is all."""

    def ready(self, step: int) -> bool:
        """Whether the text fed at ``step`` is known (always, unless the input is open)."""
        return self.feed is None or self.feed.ready(step)

    def text_at(self, step: int) -> torch.Tensor:
        if self.feed is not None:
            return self.feed.at(step)
        return self.trailing[step] if step < self.trailing.shape[0] else self.pad


@dataclass(frozen=True)
class StepResult:
    owner: Any
    frame: list[int] | None
    finished: bool


@dataclass(eq=False)
class Row:
    owner: Any
    job: TalkerJob
    limits: GenerationLimits
    generator: torch.Generator
    span: int
    slot: int = -1
    position: int = 0
    step: int = 0
    hidden: torch.Tensor | None = None
    history: list[int] = field(default_factory=list)


class TalkerBatch:
    """Not thread-safe: one scheduler thread drives it."""

    def __init__(self, talker: Talker, max_seq_len: int):
        self.talker = talker
        self.spec = talker.spec
        self.config = BatchConfig(max_seq_len)
        weight = talker.codec_head.weight
        self.device, self.dtype = weight.device, weight.dtype
        t = self.spec.talker
        kv_heads = talker.model.layers[0].self_attn.k_proj.out_features // t.head_dim  # this rank's (all without TP)
        self.cache = SlotCache(t.layers, kv_heads, t.head_dim, self.device, self.dtype)
        self.mirror: Any = None
        """Rank 0 of a TP group: sends each forward's inputs to the other ranks (``omni_models.qwen3_tts_12hz.tp``)."""
        self.order: list[Row] = []
        self.rows: dict[Any, Row] = {}
        vocab = self.spec.codec_vocab
        mask = torch.zeros(vocab, dtype=torch.bool, device=self.device)
        mask[max(0, vocab - SUPPRESSED_SPAN) :] = True
        mask[self.spec.codec.eos] = False
        self.suppressed = mask

    # -- the interface StepScheduler drives ------------------------------------------------
    def check_prompt(self, prompt: torch.Tensor) -> None:
        hidden = self.spec.talker.hidden
        if prompt.dim() != 3 or prompt.shape[0] != 1 or prompt.shape[2] != hidden:
            raise ValueError(f"prompt must be [1, T, {hidden}] for this talker, got {tuple(prompt.shape)}")

    def reserve(self, prompt_len: int, limits: GenerationLimits) -> int:
        span = prompt_len + limits.max_new_tokens
        if span > self.config.max_seq_len:
            raise ValueError(
                f"a prompt of {prompt_len} positions plus up to {limits.max_new_tokens} generated frames exceeds the engine's "
                f"context of {self.config.max_seq_len}; shorten the text, the reference audio or max_new_tokens"
            )
        return span

    def join(self, owner: Any, prompt: torch.Tensor, limits: GenerationLimits, job: TalkerJob, generator: torch.Generator) -> Row:
        return self.join_many([(owner, prompt, limits, job, generator)])[0]

    def join_many(self, requests: list[tuple[Any, torch.Tensor, GenerationLimits, TalkerJob, torch.Generator]]) -> list[Row]:
        """Prefill several requests ``(owner, prompt [1, T, hidden], limits, job, generator)`` in one
        forward (their prompts packed end to end, each attending only over its own); all of them
        step from the next step. If anything fails, none joins."""
        rows, prompts = [], []
        for owner, prompt, limits, job, generator in requests:
            self.check_prompt(prompt)
            span = self.reserve(prompt.shape[1], limits)
            rows.append(Row(owner, job, limits, generator, span, slot=len(self.order) + len(rows)))
            prompts.append(prompt[0].to(self.device, self.dtype))
        lengths = [p.shape[0] for p in prompts]
        packed = torch.cat(prompts)[None]
        first = rows[0].slot
        with self.mirror.prefill(first, lengths, packed) if self.mirror is not None else contextlib.nullcontext():
            hidden = self.prefill(first, lengths, packed)[0]
        end = 0
        for row, length in zip(rows, lengths):
            end += length
            row.hidden, row.position = hidden[end - 1], length
            self.order.append(row)
            self.rows[row.owner] = row
        return rows

    def prefill(self, first: int, lengths: list[int], packed: torch.Tensor) -> torch.Tensor:
        """Run prompts packed end to end in ``packed`` ``[1, sum(lengths), hidden]`` into cache slots
        ``first, first + 1, ...``; their hidden states (every TP rank runs this). The projections see
        all positions at once; attention runs per prompt, causal over its own positions only."""
        self.cache.ensure(first + len(lengths), max(lengths) + 1)
        cache = self.cache
        bounds = [0]
        for length in lengths:
            bounds.append(bounds[-1] + length)

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            outs = []
            for i, (begin, end) in enumerate(itertools.pairwise(bounds)):
                cache.keys[layer, first + i, :, : end - begin] = k[0, :, begin:end]
                cache.values[layer, first + i, :, : end - begin] = v[0, :, begin:end]
                qs, ks, vs = q[:, :, begin:end], k[:, :, begin:end], v[:, :, begin:end]
                outs.append(F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, enable_gqa=ks.shape[1] != qs.shape[1]))
            return outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)

        positions = torch.cat([torch.arange(length, device=self.device) for length in lengths])[None]
        return self.talker.model.run(packed, positions, attend)

    def leave(self, owner: Any) -> None:
        row = self.rows.pop(owner, None)
        if row is None:
            return
        last = self.order.pop()
        if last is not row:
            if self.mirror is not None:
                self.mirror.move(last.slot, row.slot)
            self.cache.move(last.slot, row.slot)
            self.order[row.slot] = last
            last.slot = row.slot

    def clear(self) -> None:
        self.rows.clear()
        self.order.clear()

    def __len__(self) -> int:
        return len(self.order)

    def __bool__(self) -> bool:
        return bool(self.order)

    def ready_rows(self) -> list[Row]:
        """The rows that can step now (every row but those held for appended text)."""
        return [r for r in self.order if r.job.ready(r.step)]

    def step(self, only: Any = None) -> list[StepResult]:
        """One step for every ready row, or only for the ready rows whose owners are in ``only``: the
        others sit it out like held rows (no sampling, so their generators draw nothing; state,
        position and cache as they were), so every row's codes are those it gets stepping every time."""
        rows = self.ready_rows()
        if only is not None:
            rows = [r for r in rows if r.owner in only]
        if not rows:
            return []
        eos = self.spec.codec.eos
        hidden = torch.stack([r.hidden for r in rows])
        logits = self.talker.codec_head(hidden).float()
        logits[:, self.suppressed] = float("-inf")
        for i, row in enumerate(rows):
            if row.step < row.limits.min_new_tokens:
                logits[i, eos] = float("-inf")
        first = pick_rows(logits, [r.job.talker for r in rows], [r.generator for r in rows], [r.history for r in rows])
        results: list[StepResult] = []
        live: list[int] = []
        for i, (row, code) in enumerate(zip(rows, first.tolist())):
            row.history.append(code)
            if code == eos or row.step + 1 >= row.limits.max_new_tokens:
                results.append(StepResult(row.owner, None, True))
            else:
                live.append(i)
        if live:
            index = torch.tensor(live, device=self.device)
            live_rows = [rows[i] for i in live]
            first_embed = self.talker.codec(first[index])
            subs = [r.job.sub for r in live_rows]
            gens = [r.generator for r in live_rows]
            rest = self.talker.code_predictor.generate(hidden[index], first_embed, lambda _g, lg: pick_rows(lg.float(), subs, gens))
            codes = torch.stack(rest, dim=1)
            frames = torch.cat([first[index, None], codes], dim=1).tolist()
            embeds = self.talker.code_predictor.embed(codes, first_embed)
            feed = {}
            for j, row in enumerate(live_rows):
                results.append(StepResult(row.owner, frames[j], False))
                feed[row.owner] = embeds[j] + row.job.text_at(row.step).to(embeds.dtype)
        for result in results:
            if result.finished:
                self.leave(result.owner)
        for row in rows:
            row.step += 1
        if live:
            self._advance(feed)
        return results

    def _advance(self, feed: dict[Any, torch.Tensor]) -> None:
        """One talker forward for the rows that were fed; rows that sat out or are held are not in it."""
        rows = [r for r in self.order if r.owner in feed]  # slot order
        x = torch.stack([feed[r.owner] for r in rows])[:, None]
        positions = torch.tensor([r.position for r in rows], device=self.device)
        slots = None if len(rows) == len(self.order) else torch.tensor([r.slot for r in rows], device=self.device)
        with self.mirror.advance(x, positions, slots) if self.mirror is not None else contextlib.nullcontext():
            out = self.advance(x, positions, slots)
        for i, row in enumerate(rows):
            row.hidden = out[i]
            row.position += 1

    def advance(self, x: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor | None = None) -> torch.Tensor:
        """One position for cache ``slots`` (None: every slot ``0..n-1``, read as a view): inputs
        ``[n, 1, hidden]`` at ``positions`` ``[n]`` -> ``[n, hidden]`` (every TP rank runs this)."""
        n = x.shape[0]
        length = int(positions.max()) + 1
        self.cache.ensure(n if slots is None else int(slots.max()) + 1, length)
        cache = self.cache
        index = torch.arange(n, device=self.device) if slots is None else slots
        mask = (torch.arange(length, device=self.device)[None] <= positions[:, None])[:, None, None]

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            cache.keys[layer, index, :, positions] = k[:, :, 0]
            cache.values[layer, index, :, positions] = v[:, :, 0]
            if slots is None:
                keys, values = cache.keys[layer, :n, :, :length], cache.values[layer, :n, :, :length]
            else:
                keys, values = cache.keys[layer, slots, :, :length], cache.values[layer, slots, :, :length]
            return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=keys.shape[1] != q.shape[1])

        return self.talker.model.run(x, positions[:, None], attend)[:, 0]
