"""The talker engine under omni's continuous-batching scheduler.

``TalkerScheduler`` is ``omni_models.common.scheduler.StepScheduler`` driving a ``TalkerBatch``
instead of the shared random-weight ``DecodeBatch`` (same admission, cancellation, deadlines,
chunked hand-over). Under ``scheduler: deadline`` streams are admitted first and their first chunk
ramps; ``TalkerBatch`` has neither ``join_many`` nor ``step(only=...)``, so its prefills run one
request at a time and every row steps (the scheduler checks for both).
"""

from __future__ import annotations

from typing import Any

import torch

from omni_models.common.playback import Schedule
from omni_models.common.sampling import generator_for
from omni_models.common.scheduler import BatchLimits, FrameStream, StepScheduler
from omni_models.common.stages import emit_codes, is_cancelled

from .batch import TalkerBatch, TalkerJob
from .prompt import build_prompt


class TalkerScheduler(StepScheduler):
    def __init__(self, batch: TalkerBatch, *, name: str, limits: BatchLimits, stage: str, schedule: Schedule | None = None):  # noqa: D107 - see the class docstring
        super().__init__(None, name=name, limits=limits, stage=stage, schedule=schedule, batch=batch)


class TalkerEngine:
    """``frames(prepared, ctx)``: submit a prepared request; ``stream`` sends its code chunks to the vocoder."""

    def __init__(self, batch: TalkerBatch, *, name: str, limits: BatchLimits, seed: int, chunking: tuple[int, int], stage: str = "tts_engine", schedule: Schedule | None = None):
        self.batch, self.seed, self.chunking, self.name = batch, seed, chunking, name
        self.scheduler = TalkerScheduler(batch, name=f"{name} {stage}", limits=limits, stage=stage, schedule=schedule)

    def submit(self, prepared: Any, ctx: Any = None, *, chunked: bool = True) -> FrameStream:
        with torch.inference_mode():
            prompt, trailing, pad = build_prompt(self.batch.talker, prepared.inputs)
        fields = prepared.fields
        job = TalkerJob(fields.talker, fields.sub, trailing, pad)
        return self.scheduler.submit(
            prompt, fields.limits, job, generator_for(self.seed, fields.seed, self.name),
            cancelled=lambda: is_cancelled(ctx), deadline=getattr(ctx, "deadline", None),
            chunking=self.chunking if chunked else None,
            on_start=getattr(ctx, "record_queue_wait", None),
        )

    def stream(self, prepared: Any, ctx: Any) -> int:
        frames = self.submit(prepared, ctx)
        extra = None
        if prepared.context_codes is not None:
            extra = {"context_codes": prepared.context_codes.T.contiguous()}
        try:
            return emit_codes(ctx, frames.chunks(), extra=extra)
        finally:
            frames.cancel()

    def collect(self, prepared: Any, ctx: Any = None) -> torch.Tensor:
        """All frames ``[T, G]`` of one request (tests, benchmarks)."""
        frames = self.submit(prepared, ctx, chunked=False)
        try:
            rows = [frame for frame in frames]
        finally:
            frames.cancel()
        if not rows:
            return torch.zeros((0, self.batch.spec.num_code_groups), dtype=torch.long)
        return torch.stack(rows)
