"""Continuous batching for an AR stage: requests join the running batch between decode steps.

The runtime calls a sync stage's ``process`` once per request, each in a thread of its own
(docs/stage-contract.md). ``StepScheduler`` sits under those calls in the stage object: a
``process`` call ``submit``s its prompt and iterates the returned ``FrameStream``, streaming
chunks exactly as it would from a private generator, while one scheduler thread per engine
runs the loop:

1. admit waiting requests while the batch has room (``max_batch_size`` requests,
   ``max_batch_tokens`` reserved cache positions) and prefill them into their slots;
2. drop requests that were cancelled, abandoned by their caller or are past their deadline;
3. one batched step for everyone running; each frame goes to its request's stream, and a
   request that finished leaves the batch at once.

The order is the stage's ``Schedule`` (``omni_models.common.playback``). ``deadline`` (the
default) protects playback: streams are admitted before non-streamed requests, all admitted
requests are prefilled in one forward, a stream that starts while the engine is busy gets a
small first chunk and then chunks that ramp up, non-streamed requests sit out steps while
a stream is due, and while a new stream awaits its first chunk, streams whose listeners have
audio to spare sit out too (its first frames come from steps of a small batch). ``fifo``
admits in arrival order and prefills one request at a time.

A request's output does not depend on who else is running (``omni_models.common.batch``), so
batching changes throughput and latency, never audio.

The GIL: a step is a few hundred short tensor operations, each of which releases the GIL and
must take it back. With the interpreter's default 5 ms switch interval, any other thread of
the process running Python (the worker's event loop, vocoder threads, emitters) can hold the
scheduler up to 5 ms per operation; measured on Higgs-sized models at 8 concurrent requests,
a step took 4x its CPU time in wall time. The scheduler lowers the process's switch interval
to ``SWITCH_INTERVAL_S`` (never raises it), which brought wall time within 1.6x of CPU time.
"""

from __future__ import annotations

import inspect
import math
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .ar import ARModel
from .batch import DecodeBatch
from .batch_limits import DEFAULT_MAX_BATCH_SIZE as DEFAULT_MAX_BATCH_SIZE  # re-exported: model builders import it here
from .batch_limits import BatchKnobError as BatchKnobError
from .batch_limits import BatchLimits as BatchLimits
from .frame_stream import FrameStream as FrameStream  # re-exported: stages and tests import it here
from .frame_stream import _can_wait, _needs_steps
from .limits import GenerationLimits
from .playback import Schedule, ScheduleKnobError
from .sampling import SamplingParams

#: GIL switch interval while an engine runs in the process (see the module docstring).
SWITCH_INTERVAL_S = 0.0002


@dataclass(eq=False)
class _Waiting:
    stream: FrameStream
    prompt: torch.Tensor
    limits: GenerationLimits
    params: SamplingParams
    generator: torch.Generator
    span: int
    on_start: Callable[[float], None] | None = None


def _describe(models: Any) -> str:
    if isinstance(models, (list, tuple)):
        layouts = [getattr(getattr(m, "config", None), "layout", type(m).__name__) for m in models]
        return f"{len(models)} models (layouts {', '.join(layouts)})"
    return type(models).__name__


class StepScheduler:
    """One model's running batch, driven by its own thread; ``submit`` from any thread."""

    def __init__(
        self, model: ARModel | None, *, name: str = "engine", limits: BatchLimits | None = None, stage: str = "tts_engine",
        schedule: Schedule | None = None, batch: Any = None,
    ):
        """``batch``: a running batch of a model with its own step (``join``/``leave``/``step``/``reserve``
        like ``DecodeBatch``, e.g. the real Higgs-TTS checkpoint's); otherwise ``DecodeBatch(model)``.
        The deadline schedule packs prefills when the batch has ``join_many`` and lets non-streamed
        rows sit out when its ``step`` takes ``only``; without them it joins one at a time and
        steps every row."""
        if batch is None and not isinstance(model, ARModel):
            raise TypeError(f"{name}: a scheduler batches one ARModel, got {_describe(model)}: build one engine per model (one model, one layout per batch)")
        self.batch = batch if batch is not None else DecodeBatch(model)
        self.limits = limits or BatchLimits()
        self.schedule = schedule or Schedule()
        problems = self.schedule.problems(stage)
        try:
            self.limits.check(self.batch.config.max_seq_len, stage)
        except BatchKnobError as exc:  # every knob's problem at once
            if problems:
                raise ScheduleKnobError("\n".join([str(exc), *problems])) from None
            raise
        if problems:
            raise ScheduleKnobError(f"stage {stage}: " + "\n".join(problems))
        self.name = name
        self._packs = callable(getattr(self.batch, "join_many", None))
        self._steps_subsets = "only" in inspect.signature(self.batch.step).parameters
        self._cond = threading.Condition()
        self._waiting: deque[_Waiting] = deque()
        self._reserved = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self.steps = 0
        self.peak_batch = 0
        self.prefills: list[int] = []
        """Requests prefilled by each prefill forward, in order (the last 64)."""
        self.step_s = 0.0
        """Recent wall time of one decode step: rises to a slower step at once, falls slowly (the
        lead a stream that sits out needs to make its next chunk in time)."""
        self._step_s_by_rows: dict[int, float] = {}
        self.sat_out = 0
        """Row-steps that sat out while a stream was due (non-streamed requests; streams with audio
        to spare while a new stream awaited its first chunk)."""

    def step_time(self, rows: int) -> float:
        """Expected wall time of a step of ``rows`` rows: measured for that many, else for the
        nearest larger batch, else the largest smaller one scaled by the square root of the
        growth (measured on 2 CPU cores, a step's cost grows about that fast: Qwen3-TTS 1 -> 4
        rows 7 -> 15 ms, the 12 Hz talker 1 -> 8 rows 17 -> 30 ms); 0 before any step."""
        times = self._step_s_by_rows
        if rows in times:
            return times[rows]
        larger = [n for n in times if n > rows]
        if larger:
            return times[min(larger)]
        smaller = max(times, default=0)
        return times[smaller] * math.sqrt(rows / smaller) if smaller else 0.0

    @property
    def token_budget(self) -> int:
        budget = self.limits.max_batch_tokens
        return budget if budget is not None else self.limits.max_batch_size * self.batch.config.max_seq_len

    def submit(
        self,
        prompt: torch.Tensor,
        limits: GenerationLimits,
        params: SamplingParams,
        generator: torch.Generator,
        *,
        cancelled: Callable[[], bool] = lambda: False,
        deadline: float | None = None,
        chunking: tuple[int, int] | None = None,
        on_start: Callable[[float], None] | None = None,
    ) -> FrameStream:
        """Queue a request (prompt ``[1, T, dim]``); a request that cannot fit the context is refused
        here, before any audio streams. ``deadline`` is a ``time.monotonic()`` instant;
        ``chunking`` groups the frames handed over (``FrameStream``); ``on_start`` hears the
        seconds the request waited here before its prefill began (``StageContext.record_queue_wait``)."""
        self.batch.check_prompt(prompt)
        span = self.batch.reserve(prompt.shape[1], limits)
        stream = FrameStream(cancelled, deadline, chunking, self.schedule.frame_rate)
        with self._cond:
            if self._closed:
                raise RuntimeError(f"{self.name}: the engine's scheduler is closed")
            self._waiting.append(_Waiting(stream, prompt, limits, params, generator, span, on_start))
            if self._thread is None:
                sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
                self._thread = threading.Thread(target=self._run, name=f"{self.name}-scheduler", daemon=True)
                self._thread.start()
            self._cond.notify()
        return stream

    def close(self) -> None:
        """Stop the scheduler thread; requests still waiting or running end with an error."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()

    # the scheduler thread -------------------------------------------------------------
    def _run(self) -> None:
        with torch.inference_mode():
            while True:
                with self._cond:
                    while not self._closed and not self._waiting and not self.batch:
                        self._cond.wait()
                    if self._closed:
                        break
                    busy = bool(self.batch) or len(self._waiting) > 1
                    admitted = self._admit()
                if admitted:
                    self._prefill(admitted, busy)
                self._drop_cancelled()
                if self.batch:
                    self._step()
        closed = RuntimeError(f"{self.name}: the engine was shut down")
        for waiting in self._waiting:
            waiting.stream._finish(closed)
        for stream in list(self.batch.rows):
            stream._finish(closed)
        self.batch.clear()

    def _admit(self) -> list[_Waiting]:
        """Waiting requests that fit now, the head first (it waits rather than be overtaken): in
        arrival order under fifo; under deadline streams first (earliest arrival first), then
        non-streamed requests."""
        if self.schedule.deadline and len(self._waiting) > 1:
            self._waiting = deque(sorted(self._waiting, key=lambda w: w.stream.due()))  # stable: ties keep arrival order
        admitted = []
        while self._waiting and len(self.batch) + len(admitted) < self.limits.max_batch_size:
            head = self._waiting[0]
            if head.stream.is_cancelled():
                self._waiting.popleft().stream._finish()
                continue
            if self._reserved + head.span > self.token_budget:
                break
            self._waiting.popleft()
            self._reserved += head.span
            admitted.append(head)
        return admitted

    def _prefill(self, admitted: list[_Waiting], busy: bool) -> None:
        """fifo: one forward per request; deadline: one forward for all of them (if it fails,
        each is retried alone, so only a request that fails by itself fails)."""
        now = time.monotonic()
        for waiting in admitted:
            if waiting.on_start is not None:
                try:
                    waiting.on_start(now - waiting.stream.clock.arrived)
                except Exception:  # noqa: BLE001, S110 - a metric must never fail the engine
                    pass
        if self.schedule.deadline:
            for waiting in admitted:
                waiting.stream.fit_to_playback(self.schedule.due_margin_s)
            if busy or len(admitted) > 1:
                for waiting in admitted:
                    waiting.stream.start_small(self.schedule.busy_first_chunk_frames, self.step_time(len(self.batch) + len(admitted)))
            if len(admitted) > 1 and self._packs:
                try:
                    self.batch.join_many([(w.stream, w.prompt, w.limits, w.params, w.generator) for w in admitted])
                except Exception:  # noqa: BLE001 - fall back to one at a time to find the request that fails
                    pass
                else:
                    self.prefills = [*self.prefills[-63:], len(admitted)]
                    return
        for waiting in admitted:
            self._join(waiting)

    def _join(self, waiting: _Waiting) -> None:
        try:
            self.batch.join(waiting.stream, waiting.prompt, waiting.limits, waiting.params, waiting.generator)
        except Exception as exc:  # noqa: BLE001 - a failed prefill fails that request only
            self._reserved -= waiting.span
            waiting.stream._finish(exc)
        else:
            self.prefills = [*self.prefills[-63:], 1]

    def _leave(self, stream: FrameStream, error: BaseException | None = None) -> None:
        row = self.batch.rows.get(stream)
        if row is not None:
            self._reserved -= row.span
            self.batch.leave(stream)
        stream._finish(error)

    def _drop_cancelled(self) -> None:
        now = time.monotonic()
        for stream in list(self.batch.rows):
            if stream.is_cancelled():
                self._leave(stream)
            elif stream.deadline is not None and now >= stream.deadline:
                self._leave(stream, TimeoutError(f"{self.name}: the request passed its deadline while generating"))

    def _stepping(self) -> set[FrameStream] | None:
        """Who steps now (deadline): everyone, except while a stream is due. Then non-streamed
        requests sit out; and while a stream awaits its first chunk, so do streams whose listeners
        hold more than ``due_margin_s`` of audio: the new stream's first frames come from a
        small batch's steps (a step's cost grows with the batch) instead of waiting behind
        chunks nobody needs yet. Those streams step again as soon as their own clock comes
        within the margin, so they cannot run dry for it."""
        if not self.schedule.deadline or not self._steps_subsets:
            return None
        now = time.monotonic()
        margin, step_s = self.schedule.due_margin_s, self.step_s
        streams = list(self.batch.rows)
        if not any(_needs_steps(s, now, margin, step_s) for s in streams):
            return None
        if any(s.streaming and s.clock.started is None for s in streams):
            chosen = {s for s in streams if s.streaming and not _can_wait(s, now, margin, step_s)}
        else:
            chosen = {s for s in streams if s.streaming}
        self.sat_out += len(streams) - len(chosen)
        return chosen if len(chosen) < len(streams) else None

    def _step(self) -> None:
        self.peak_batch = max(self.peak_batch, len(self.batch))
        only = self._stepping()
        spans = {stream: row.span for stream, row in self.batch.rows.items() if only is None or stream in only}
        began = time.monotonic()
        try:
            results = self.batch.step(only) if only is not None else self.batch.step()
        except Exception as exc:  # noqa: BLE001 - a failed step fails the requests in it, the engine goes on
            for stream, span in spans.items():
                self.batch.leave(stream)
                self._reserved -= span
                stream._finish(exc)
            return
        self.steps += 1
        took = time.monotonic() - began
        self.step_s = max(took, 0.8 * self.step_s + 0.2 * took)
        rows, known = len(spans), self._step_s_by_rows.get(len(spans))
        self._step_s_by_rows[rows] = took if known is None else 0.8 * known + 0.2 * took
        for result in results:
            stream = result.owner
            if result.frame is not None:
                stream._put(result.frame)
            if result.finished:
                self._reserved -= spans[stream]
                stream._finish()
