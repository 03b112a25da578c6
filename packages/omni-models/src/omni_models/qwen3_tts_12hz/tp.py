"""Tensor parallelism for the Qwen3 talker: rank 0 runs the batch, the other ranks replay its forwards.

The talker's decoder layers are split Megatron-style (``omni_models.common.parallel``: q/k/v and
gate/up column-parallel, o and down row-parallel, one all-reduce per attention block and per MLP
block; its KV cache holds the rank's key/value heads). Embeddings, the codec head, the text
projection and the code predictor stay whole and run on rank 0 only, like the common engine's
(``omni_models.common.tp_engine``). ``TalkerBatch`` calls the mirror around its three operations
that touch the sharded layers: a (packed) prefill into slots, a slot moved when a row leaves, and a
decode step over the stepping rows' slots; a follower replays each on its own ``TalkerBatch``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from omni_models.common.tp_engine import FIRST_FREE_OP, Follower, Mirror

PREFILL, MOVE, ADVANCE = FIRST_FREE_OP, FIRST_FREE_OP + 1, FIRST_FREE_OP + 2


class TalkerMirror(Mirror):
    def __init__(self, group: Any, batch: Any):
        super().__init__(group, batch.device, batch.dtype)
        self.hidden = batch.spec.talker.hidden

    @contextlib.contextmanager
    def prefill(self, first: int, lengths: list[int], packed: torch.Tensor) -> Iterator[None]:
        lengths_t = torch.tensor(lengths, dtype=torch.long, device=self.device)
        with self.op([PREFILL, first, len(lengths), packed.shape[1]], lengths_t, packed):
            yield

    def move(self, src: int, dst: int) -> None:
        self.send([MOVE, src, dst])

    @contextlib.contextmanager
    def advance(self, x: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor | None) -> Iterator[None]:
        tensors = [positions.to(torch.long)] if slots is None else [positions.to(torch.long), slots.to(torch.long)]
        with self.op([ADVANCE, x.shape[0], int(slots is not None)], *tensors, x):
            yield


class TalkerFollower(Follower):
    def __init__(self, group: Any, batch: Any):
        super().__init__(group, batch.device, batch.dtype)
        self.batch = batch
        self.hidden = batch.spec.talker.hidden

    def handle(self, op: int, args: list[int]) -> None:
        if op == PREFILL:
            lengths = self.recv((args[1],), torch.long).tolist()
            self.batch.prefill(args[0], lengths, self.recv((1, args[2], self.hidden)))
        elif op == MOVE:
            self.batch.cache.move(args[0], args[1])
        elif op == ADVANCE:
            positions = self.recv((args[0],), torch.long)
            slots = self.recv((args[0],), torch.long) if args[1] else None
            self.batch.advance(self.recv((args[0], 1, self.hidden)), positions, slots)
            self.steps += 1
        else:
            raise RuntimeError(f"{self.group.who}: unknown operation {op} from rank 0")


def engage(batch: Any, group: Any) -> Any:
    """Wire a sharded talker's batch into its group: rank 0 mirrors, the other ranks follow."""
    batch.talker.model.reduce = group.all_reduce
    if group.rank == 0:
        batch.mirror = TalkerMirror(group, batch)
    else:
        batch.tp_follower = TalkerFollower(group, batch).start()
    return batch
