"""The talker engine under omni's continuous-batching scheduler.

``TalkerScheduler`` is ``omni_models.common.scheduler.StepScheduler`` driving a ``TalkerBatch``
instead of the shared random-weight ``DecodeBatch`` (same admission, cancellation, deadlines,
chunked hand-over). Under ``scheduler: deadline`` streams are admitted first and their first chunk
ramps, requests admitted together are prefilled in one forward (``TalkerBatch.join_many``) and rows
whose listeners have audio to spare sit out steps while a stream is due (``step(only=...)``).

A request whose input is open (``append.py``) waits, before its prompt is built, until the
prompt's text arrived (one body token; in-context cloning: as many as the reference frames
leave room for) or its input closed; once running, its row is held while it waits for text (the
frames it made so far go out as a partial chunk), and when every row is held the scheduler thread sleeps until a piece arrives (or ``HOLD_POLL_S``,
to notice cancellations and deadlines).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from omni_models.common.playback import Schedule
from omni_models.common.sampling import generator_for
from omni_models.common.scheduler import BatchLimits, FrameStream, StepScheduler
from omni_models.common.stages import emit_codes, is_cancelled
from omni_runtime.errors import RequestCancelled

from .append import OpenText
from .batch import TalkerBatch, TalkerJob
from .prompt import body_in_prompt, build_prompt, with_body

#: Longest sleep of the scheduler thread while every row waits for appended text.
HOLD_POLL_S = 0.05


class TalkerScheduler(StepScheduler):
    def __init__(self, batch: TalkerBatch, *, name: str, limits: BatchLimits, stage: str, schedule: Schedule | None = None):  # noqa: D107 - see the class docstring
        super().__init__(None, name=name, limits=limits, stage=stage, schedule=schedule, batch=batch)

    def wake(self) -> None:
        """Any thread: text was appended (or an input closed); a held row may step."""
        with self._cond:
            self._cond.notify()

    def _step(self) -> None:
        ready = self.batch.ready_rows()
        if len(ready) < len(self.batch):
            self._hand_over_held(ready)
        if self.batch and not ready:  # every row waits for appended text
            with self._cond:
                if not self._waiting and not self._closed:
                    self._cond.wait(HOLD_POLL_S)
            return
        super()._step()

    def _stepping(self) -> set[Any] | None:
        """The deadline scheduler's choice less the rows held for text (they cannot step); if none of
        the chosen can step, every ready row steps (sitting out would only spin the thread)."""
        only = super()._stepping()
        if only is None:
            return None
        only = only & {row.owner for row in self.batch.ready_rows()}
        return only or None

    def _hand_over_held(self, ready: list[Any]) -> None:
        """A row waiting for text hands over the frames it made so far (a partial chunk): the listener hears
        every word it was given now, not when the next words complete the chunk."""
        stepping = {id(row) for row in ready}
        for row in self.batch.order:
            stream = row.owner
            if id(row) not in stepping and stream._held:
                stream._hand_over()


class TalkerEngine:
    """``frames(prepared, ctx)``: submit a prepared request; ``stream`` sends its code chunks to the vocoder."""

    def __init__(self, batch: TalkerBatch, *, name: str, limits: BatchLimits, seed: int, chunking: tuple[int, int], stage: str = "tts_engine", schedule: Schedule | None = None):
        self.batch, self.seed, self.chunking, self.name = batch, seed, chunking, name
        self.scheduler = TalkerScheduler(batch, name=f"{name} {stage}", limits=limits, stage=stage, schedule=schedule)

    def submit(self, prepared: Any, ctx: Any = None, *, chunked: bool = True, open_text: OpenText | None = None) -> FrameStream:
        """``open_text``: the request's input is open (its body ids grow, ``append.py``)."""
        inputs = prepared.inputs
        feed = None
        if open_text is not None:
            deadline = getattr(ctx, "deadline", None)
            ids, closed = open_text.wait_for(body_in_prompt(inputs), lambda: is_cancelled(ctx) or (deadline is not None and time.monotonic() >= deadline))
            if is_cancelled(ctx):
                raise RequestCancelled()
            if not closed and len(ids) < body_in_prompt(inputs):
                raise TimeoutError(f"{self.name}: the request passed its deadline while waiting for its text")
            inputs = with_body(inputs, ids)
            feed = None if closed else open_text
        with torch.inference_mode():
            talker = self.batch.talker
            prompt, trailing, pad = build_prompt(talker, inputs, open_input=feed is not None)
            if feed is not None:
                t = talker.spec.text
                eos = talker.text([t.tts_bos, t.tts_eos, t.tts_pad])[1]  # as build_prompt computes it
                feed.bind(len(ids), trailing, talker.text, eos, pad, self.scheduler.wake)
        fields = prepared.fields
        job = TalkerJob(fields.talker, fields.sub, trailing, pad, feed)
        return self.scheduler.submit(
            prompt, fields.limits, job, generator_for(self.seed, fields.seed, self.name),
            cancelled=lambda: is_cancelled(ctx), deadline=getattr(ctx, "deadline", None),
            chunking=self.chunking if chunked else None,
            on_start=getattr(ctx, "record_queue_wait", None),
        )

    def stream(self, prepared: Any, ctx: Any, open_text: OpenText | None = None) -> int:
        frames = self.submit(prepared, ctx, open_text=open_text)
        extra = None
        if prepared.context_codes is not None:
            extra = {"context_codes": prepared.context_codes.T.contiguous()}
        try:
            return emit_codes(ctx, frames.chunks(), extra=extra)
        finally:
            frames.cancel()

    def collect(self, prepared: Any, ctx: Any = None, open_text: OpenText | None = None) -> torch.Tensor:
        """All frames ``[T, G]`` of one request (tests, benchmarks)."""
        frames = self.submit(prepared, ctx, chunked=False, open_text=open_text)
        try:
            rows = [frame for frame in frames]
        finally:
            frames.cancel()
        if not rows:
            return torch.zeros((0, self.batch.spec.num_code_groups), dtype=torch.long)
        return torch.stack(rows)
