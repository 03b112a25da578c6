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
then one ``Decoder.step`` for the rows that continue. Prefill runs per request (its own shape),
between steps, straight into its slot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

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
        """Give ``row`` the next slot (growing the pool) and return a cache over it for its prefill."""
        slot = len(self.rows)
        if slot == self.keys.shape[1]:
            capacity = max(4, 2 * slot)
            keys, values = self._alloc(capacity), self._alloc(capacity)
            keys[:, :slot], values[:, :slot] = self.keys, self.values
            self.keys, self.values = keys, values
        self.rows.append(row)
        row.pool, row.slot = self, slot
        return KVCache(self.keys[:, slot : slot + 1], self.values[:, slot : slot + 1])

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

    def __init__(self, pools: list[KVPool], positions: torch.Tensor):
        self.segments = []
        start = 0
        for pool in pools:
            n = len(pool.rows)
            pos = positions[start : start + n]
            mask = torch.arange(pool.span, device=positions.device)[None, :] <= pos[:, None]
            self.segments.append((pool, start, start + n, torch.arange(n, device=positions.device), pos, mask[:, None, None, :]))
            start += n

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        out = []
        for pool, start, end, slots, pos, mask in self.segments:
            pool.keys[layer, slots, :, pos] = k[start:end, :, 0]
            pool.values[layer, slots, :, pos] = v[start:end, :, 0]
            n = end - start
            out.append(
                F.scaled_dot_product_attention(
                    q[start:end], pool.keys[layer, :n], pool.values[layer, :n], attn_mask=mask,
                    enable_gqa=q.shape[1] != pool.keys.shape[2],  # grouped-query attention: fewer KV heads (Qwen3)
                )
            )
        return out[0] if len(out) == 1 else torch.cat(out)


@dataclass(eq=False)
class Row:
    """One running request: its layout state, sampler, cache slot and last hidden state."""

    owner: Any
    state: FrameState
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


class DecodeBatch:
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
        self.pools: dict[int, KVPool] = {}
        self.rows: dict[Any, Row] = {}

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
        self.check_prompt(prompt)
        span = self.reserve(prompt.shape[1], limits)
        pool = self.pools.get(span)
        if pool is None:
            pool = self.pools[span] = (self.model.kv_pool_type or KVPool)(self.model.decoder.kv_config, span, self.device, self.dtype)
        row = Row(owner, FrameState(self.config, limits), params, GumbelNoise(generator), span)
        cache = pool.add(row)
        try:
            row.hidden = self.model.decoder(prompt.to(self.device, self.dtype), cache)[0, -1]
        except BaseException:
            pool.remove(row)
            raise
        row.position = prompt.shape[1]
        self.rows[owner] = row
        return row

    def leave(self, owner: Any) -> None:
        row = self.rows.pop(owner, None)
        if row is not None and row.pool is not None:
            row.pool.remove(row)

    def clear(self) -> None:
        self.rows.clear()
        self.pools.clear()

    def __len__(self) -> int:
        return len(self.rows)

    def _ordered(self) -> tuple[list[KVPool], list[Row]]:
        pools = [p for _, p in sorted(self.pools.items()) if p.rows]
        return pools, [row for p in pools for row in p.rows]

    def step(self) -> list[StepResult]:
        """Sample one step for every running request and advance those that continue."""
        if not self.rows:
            return []
        _, rows = self._ordered()
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
        results = []
        feed: dict[Row, list[int]] = {}
        for row, codes_row in zip(rows, codes.tolist()):
            frame, finished, fed = row.state.accept(codes_row)
            results.append(StepResult(row.owner, frame, finished))
            if finished:
                self.leave(row.owner)
            else:
                feed[row] = fed
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
        pools, rows = self._ordered()
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
