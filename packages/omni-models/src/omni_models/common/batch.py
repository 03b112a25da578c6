"""The running batch of one AR engine: every request at its own position, one forward per step.

Cache layout (why not a paged cache): each request gets one slot in a pool of caches of a
fixed *span*, the positions it can ever need (its prompt plus its maximum new frames, rounded
up to ``SPAN_QUANTUM``). Pools are per span (size classes) and grow by doubling, so memory
follows the requests actually running, and a slot is one contiguous block that a prefill
writes in place and the batched step reads without gathering. Rows of a pool are kept
compact (a leaving request's slot is refilled by the pool's last row), so a step attends over
``keys[:n]`` of each pool: no copies, no page tables. Within a pool each row masks the
positions it has not reached; because the span is fixed for the request's life, the row's
attention reduces over the same number of keys in every step whoever else is running, which
(with ``rows_linear``) keeps its sampled codes identical alone and in any batch. A paged cache
would save the padding inside a span but would make a row's reduction length depend on its
page layout, and buys little at these sizes.

A step: stack the running rows' last hidden states, one ``logits`` projection for all, the
layout's EOS masks per row, per-row sampling (each request's own parameters and generator),
the depth transformer for the rows still going (depth layout), each request's ``FrameState``,
then one ``Decoder.step`` for the rows that continue. ``step(only=...)`` advances a subset (the
deadline scheduler lets non-streamed requests sit out while a stream is due); the rows left out
keep their state and cache untouched.

Prefill runs between steps, straight into the slots: ``join_many`` packs several new requests'
prompts into one forward (``PackedPrefill``): the linear layers see all their positions as rows
(``rows_linear``, so each row's bits do not depend on its neighbours) and attention runs per
request over its own slot, exactly as a request prefilled alone, so the codes are the same
whether requests are prefilled together or one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
import torch.nn.functional as F

from .ar import ARModel, FrameState, check_context, new_positions
from .limits import GenerationLimits
from .sampling import GumbelNoise, SamplingParams, sample_rows
from .transformer import KVCache, TransformerConfig

#: Spans are multiples of this many positions (fewer size classes, less padding than powers of two).
SPAN_QUANTUM = 256


def span_for(prompt_len: int, extra: int, max_seq_len: int) -> int:
    """Cache positions reserved for a request: prompt plus new positions, rounded up to the quantum."""
    need = prompt_len + extra
    return min(max_seq_len, -(-need // SPAN_QUANTUM) * SPAN_QUANTUM)


class KVPool:
    """Cache slots of one span: keys and values ``[layers, capacity, heads, span, head_dim]``."""

    def __init__(self, config: TransformerConfig, span: int, device: torch.device, dtype: torch.dtype):
        self.config, self.span, self.device, self.dtype = config, span, device, dtype
        self.rows: list[Row] = []
        self.keys = self.values = self._alloc(0)

    def _alloc(self, capacity: int) -> torch.Tensor:
        c = self.config
        return torch.zeros((c.layers, capacity, c.heads, self.span, c.head_dim), device=self.device, dtype=self.dtype)

    def add(self, row: Row) -> KVCache:
        """Give ``row`` the next slot (growing the pool, which moves its storage) and return a cache
        over it for a prefill that runs before the pool grows again."""
        slot = len(self.rows)
        if slot == self.keys.shape[1]:
            capacity = max(4, 2 * slot)
            keys, values = self._alloc(capacity), self._alloc(capacity)
            keys[:, :slot], values[:, :slot] = self.keys, self.values
            self.keys, self.values = keys, values
        self.rows.append(row)
        row.pool, row.slot = self, slot
        return self.cache(row)

    def cache(self, row: Row) -> KVCache:
        """A cache over ``row``'s slot for its prefill (valid until the pool grows again)."""
        return KVCache(self.keys[:, row.slot : row.slot + 1], self.values[:, row.slot : row.slot + 1])

    def remove(self, row: Row) -> None:
        """Free ``row``'s slot; the last row moves into it so occupied slots stay ``0..n-1``."""
        last = self.rows.pop()
        if last is not row:
            self.keys[:, row.slot], self.values[:, row.slot] = self.keys[:, last.slot], self.values[:, last.slot]
            self.rows[row.slot] = last
            last.slot = row.slot
        row.pool = None


class RowAttention:
    """``Decoder.step``'s caches: each pool's rows write their new key at their own position and
    attend over their pool's span, masked past that position."""

    def __init__(self, pools: list[KVPool | tuple[KVPool, list[Row]]], positions: torch.Tensor):
        """``pools``: each pool with the rows that step (a bare pool: all of its rows)."""
        self.segments = []
        start = 0
        for entry in pools:
            pool, rows = entry if isinstance(entry, tuple) else (entry, entry.rows)
            n = len(rows)
            pos = positions[start : start + n]
            mask = torch.arange(pool.span, device=positions.device)[None, :] <= pos[:, None]
            whole = n == len(pool.rows)  # every row of the pool steps: its slots are 0..n-1, read in place
            slots = torch.arange(n, device=positions.device) if whole else torch.tensor([r.slot for r in rows], device=positions.device)
            self.segments.append((pool, start, start + n, slots, whole, pos, mask[:, None, None, :]))
            start += n

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        out = []
        for pool, start, end, slots, whole, pos, mask in self.segments:
            pool.keys[layer, slots, :, pos] = k[start:end, :, 0]
            pool.values[layer, slots, :, pos] = v[start:end, :, 0]
            n = end - start
            keys, values = (pool.keys[layer, :n], pool.values[layer, :n]) if whole else (pool.keys[layer, slots], pool.values[layer, slots])
            out.append(
                F.scaled_dot_product_attention(
                    q[start:end], keys, values, attn_mask=mask,
                    enable_gqa=q.shape[1] != keys.shape[1],  # grouped-query attention: fewer KV heads (Qwen3)
                )
            )
        return out[0] if len(out) == 1 else torch.cat(out)


class PackedPrefill:
    """``Decoder.step``'s caches for several prompts packed as rows ``[sum T, ...]``: each
    prompt's segment writes its keys into its own slot and attends causally over itself alone."""

    def __init__(self, segments: list[tuple[KVCache, int, int]]):
        self.segments = segments

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        out = []
        for cache, start, end in self.segments:
            # rows [T, heads, 1, head_dim] -> one sequence [1, heads, T, head_dim], as a lone prefill sees it
            q1, k1, v1 = (t[start:end, :, 0].transpose(0, 1)[None] for t in (q, k, v))
            out.append(cache.attend(layer, q1, k1, v1)[0].transpose(0, 1)[:, :, None])
        return torch.cat(out)


class RowState(Protocol):
    """A request's per-step state: takes the sampled codes, gives back (the aligned frame they
    complete or None, finished, the codes to feed back). ``FrameState`` for the catalog's layouts;
    a model with its own end-of-audio rule (Higgs-TTS) brings its own."""

    def accept(self, codes: list[int]) -> tuple[list[int] | None, bool, list[int]]: ...


@dataclass(eq=False)
class Row:
    """One running request: its layout state, sampler, cache slot and last hidden state."""

    owner: Any
    state: RowState
    params: SamplingParams
    noise: GumbelNoise
    span: int
    position: int = 0
    hidden: torch.Tensor | None = None
    pool: KVPool | None = field(default=None, repr=False)
    slot: int = -1


@dataclass(frozen=True)
class StepResult:
    owner: Any
    frame: list[int] | None
    finished: bool


class SpanBatch:
    """The slot bookkeeping of a batch over span pools: one ``KVPool`` per span, the running rows
    by owner, leaving (the slot refilled by its pool's last row), the rows of a step in a fixed
    order, and a step's sampled codes turned into results. ``DecodeBatch`` and the real Higgs-TTS
    batch (``omni_models.higgs_tts_real.engine``) are this plus their model's step."""

    def __init__(self, new_pool: Callable[[int], KVPool]):
        self.new_pool = new_pool
        self.pools: dict[int, KVPool] = {}
        self.rows: dict[Any, Row] = {}

    def _slot(self, row: Row) -> KVCache:
        """Give ``row`` a slot in the pool of its span (created on first use); a cache over it."""
        pool = self.pools.get(row.span)
        if pool is None:
            pool = self.pools[row.span] = self.new_pool(row.span)
        return pool.add(row)

    def leave(self, owner: Any) -> None:
        row = self.rows.pop(owner, None)
        if row is not None and row.pool is not None:
            row.pool.remove(row)

    def clear(self) -> None:
        self.rows.clear()
        self.pools.clear()

    def __len__(self) -> int:
        return len(self.rows)

    def _ordered(self, only: Any = None) -> tuple[list[tuple[KVPool, list[Row]]], list[Row]]:
        """Pools with the rows that step (``only``: a set of owners; None: everyone), in a fixed order."""
        pools = []
        for _, pool in sorted(self.pools.items()):
            rows = pool.rows if only is None else [r for r in pool.rows if r.owner in only]
            if rows:
                pools.append((pool, rows))
        return pools, [row for _, rows in pools for row in rows]

    def _settle(self, rows: list[Row], codes: torch.Tensor) -> tuple[list[StepResult], dict[Row, list[int]]]:
        """Each row's sampled codes through its state: the step's results (finished rows leave)
        and, for the rows that continue, the codes to feed back."""
        results, feed = [], {}
        for row, codes_row in zip(rows, codes.tolist()):
            frame, finished, fed = row.state.accept(codes_row)
            results.append(StepResult(row.owner, frame, finished))
            if finished:
                self.leave(row.owner)
            else:
                feed[row] = fed
        return results, feed


class DecodeBatch(SpanBatch):
    """The running requests of one model; ``join``/``leave`` between ``step``s (not thread-safe:
    one thread drives it, see ``omni_models.common.scheduler``)."""

    def __init__(self, model: ARModel):
        if not isinstance(model, ARModel):
            raise TypeError(
                f"a decode batch runs one ARModel, got {type(model).__name__}: build one engine per model "
                "(requests of different models or layouts never share a batch)"
            )
        self.model = model
        self.config = model.config
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        super().__init__(lambda span: (model.kv_pool_type or KVPool)(model.decoder.kv_config, span, self.device, self.dtype))

    def reserve(self, prompt_len: int, limits: GenerationLimits) -> int:
        """Check that a request fits the context (a ValueError if not); return the span it will hold."""
        extra = new_positions(self.config, limits)
        check_context(prompt_len, extra, self.config.max_seq_len)
        return span_for(prompt_len, extra, self.config.max_seq_len)

    def check_prompt(self, prompt: torch.Tensor) -> None:
        if prompt.dim() != 3 or prompt.shape[0] != 1 or prompt.shape[2] != self.config.dim:
            raise ValueError(f"prompt must be [1, T, {self.config.dim}] for this model, got {tuple(prompt.shape)}")

    def join(self, owner: Any, prompt: torch.Tensor, limits: GenerationLimits, params: SamplingParams, generator: torch.Generator) -> Row:
        """Prefill ``prompt`` ``[1, T, dim]`` into a new slot; the request takes part from the next step."""
        return self.join_many([(owner, prompt, limits, params, generator)])[0]

    def join_many(self, requests: list[tuple[Any, torch.Tensor, GenerationLimits, SamplingParams, torch.Generator]]) -> list[Row]:
        """Prefill several requests ``(owner, prompt [1, T, dim], limits, params, generator)`` in one
        forward (``PackedPrefill``); all of them take part from the next step. If the forward
        fails, none joins."""
        rows, segments, prompts, positions = [], [], [], []
        start = 0
        try:
            for owner, prompt, limits, params, generator in requests:
                self.check_prompt(prompt)
                span = self.reserve(prompt.shape[1], limits)
                row = Row(owner, FrameState(self.config, limits), params, GumbelNoise(generator), span)
                self._slot(row)
                rows.append(row)
                t = prompt.shape[1]
                segments.append((start, start + t))
                prompts.append(prompt[0])
                positions.append(torch.arange(t))
                start += t
            # caches only now: a pool that grew while adding these rows moved its storage
            caches = [(row.pool.cache(row), begin, end) for row, (begin, end) in zip(rows, segments)]
            x = torch.cat(prompts).to(self.device, self.dtype)
            hidden = self.model.decoder.step(x, torch.cat(positions).to(self.device), PackedPrefill(caches))
        except BaseException:
            for row in reversed(rows):
                row.pool.remove(row)
            raise
        for row, (begin, end) in zip(rows, segments):
            row.hidden = hidden[end - 1]
            row.position = end - begin
            self.rows[row.owner] = row
        return rows

    def step(self, only: Any = None) -> list[StepResult]:
        """Sample one step for every running request (or the owners in ``only``) and advance those that continue."""
        if not self.rows:
            return []
        _, rows = self._ordered(only)
        if not rows:
            return []
        c = self.config
        hidden = torch.stack([r.hidden for r in rows])
        logits = self.model.logits(hidden)
        logits[:, 1:, c.eos] = float("-inf")  # EOS is a codebook-0 decision
        blocked = [i for i, r in enumerate(rows) if not r.state.allow_eos]
        if blocked:
            logits[blocked, 0, c.eos] = float("-inf")
        params = [r.params for r in rows]
        noises = [r.noise for r in rows]
        codes = sample_rows(logits, params, noises)
        if self.model.depth is not None:
            codes = self._depth(rows, hidden, codes[:, 0], params, noises)
        results, feed = self._settle(rows, codes)
        if feed:
            self._advance(feed)
        return results

    def _depth(self, rows: list[Row], hidden: torch.Tensor, first: torch.Tensor, params: list[SamplingParams], noises: list[GumbelNoise]) -> torch.Tensor:
        """Codebooks 1..K-1 for the rows whose codebook 0 does not end them (the rest keep EOS)."""
        k = self.config.num_codebooks
        live = [i for i, code in enumerate(first.tolist()) if not rows[i].state.ends_at(code)]
        codes = torch.full((len(rows), k), self.config.eos, dtype=torch.long, device=first.device)
        codes[:, 0] = first
        if live:
            live_params = [params[i] for i in live]
            live_noises = [noises[i] for i in live]
            index = torch.tensor(live, device=first.device)
            codes[index] = self.model.depth.generate(hidden[index], first[index], lambda lg: sample_rows(lg, live_params, live_noises))
        return codes

    def _advance(self, feed: dict[Row, list[int]]) -> None:
        pools, rows = self._ordered({r.owner for r in feed})
        fed = torch.tensor([feed[r] for r in rows], device=self.device).T
        x = self.model.embed_frames(fed)
        positions = torch.tensor([r.position for r in rows], device=self.device)
        hidden = self.model.decoder.step(x, positions, RowAttention(pools, positions))
        for i, row in enumerate(rows):
            row.hidden = hidden[i]
            row.position += 1


@torch.inference_mode()
def generate_frames(
    model: ARModel,
    prompt: torch.Tensor,
    limits: GenerationLimits,
    params: SamplingParams,
    generator: torch.Generator,
    cancelled: Callable[[], bool] = lambda: False,
) -> Iterator[torch.Tensor]:
    """One request through a batch of its own: yield aligned frames ``[K]`` (int64) until
    end-of-speech after ``min_new_tokens`` or ``max_new_tokens`` frames; stop early once
    ``cancelled()``. The same codes as the request gets inside any batch."""
    batch = DecodeBatch(model)
    batch.reserve(prompt.shape[1], limits)
    batch.join("request", prompt, limits, params, generator)
    while batch and not cancelled():
        (result,) = batch.step()
        if result.frame is not None:
            yield torch.tensor(result.frame)
        if result.finished:
            return
