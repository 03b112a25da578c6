"""Scheduling that protects playback: the knobs, a stream's playback clock, and the vocoder's turn order.

A listener starts playing a stream when its first audio arrives; from then on the stream's
next chunk is *due* when the audio it already received runs out. Work that feeds a stream is
therefore ordered by that due time, a new stream (which has not sounded at all yet) first,
and work no listener is waiting on in real time (a non-streamed request) after due streams.

``scheduler: fifo`` keeps the order of arrival everywhere (the engine's behaviour before the
deadline scheduler), so a deployment can compare the two with ``omni bench --alt``.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

POLICIES = ("deadline", "fifo")
#: Due time of work no listener waits on in real time (sorts after every stream).
NOT_DUE = math.inf


class ScheduleKnobError(ValueError):
    """A scheduling knob (``factory_args``) has a value the engine cannot use."""


@dataclass(frozen=True)
class Schedule:
    """How an engine orders its work (``factory_args`` of the engine stage).

    ``policy``: ``deadline`` (default) or ``fifo``. Under ``deadline``: new requests are
    prefilled together in one forward, streams are admitted before non-streamed requests,
    a stream that starts while the engine is busy gets a first chunk of
    ``busy_first_chunk_frames`` frames (an idle engine uses ``first_chunk_frames``); with
    ``frame_rate`` known, every later chunk holds half the frames the stream makes (at its
    measured rate) before its listener's audio runs out less ``due_margin_s`` (for the
    vocoder and the wire), at least 1 and at most ``chunk_frames``: it arrives early, the
    listener's buffer grows, and chunks grow with it; a stream slower than real time gets
    full chunks (without a frame rate, chunks double up to ``chunk_frames``).
    Non-streamed requests sit out decode steps while a stream is due (awaits its first
    chunk, or its playback clock runs out within ``due_margin_s``).
    """

    policy: str = "deadline"
    busy_first_chunk_frames: int = 1
    frame_rate: float | None = None
    due_margin_s: float = 0.1

    @property
    def deadline(self) -> bool:
        return self.policy == "deadline"

    def problems(self, stage: str) -> list[str]:
        found = []
        if self.policy not in POLICIES:
            found.append(
                f"factory_args.scheduler: {self.policy!r} is not allowed\n  rule: one of {', '.join(POLICIES)} (deadline protects playback; fifo is the order of arrival)\n"
                f"  fix:  set stages.{stage}.factory_args.scheduler to deadline or fifo"
            )
        value = self.busy_first_chunk_frames
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            found.append(
                f"factory_args.busy_first_chunk_frames: {value!r} is not allowed\n  rule: frames in a stream's first chunk when the engine is busy; an integer >= 1\n"
                f"  fix:  set stages.{stage}.factory_args.busy_first_chunk_frames to 1 or more"
            )
        return found


class PlaybackClock:
    """One stream as its listener hears it: playing from its first audio, ``seconds`` received so far."""

    def __init__(self, now: float | None = None):
        self.arrived = time.monotonic() if now is None else now
        self.started: float | None = None
        self.seconds = 0.0

    def played(self, seconds: float, now: float | None = None) -> None:
        """Audio handed to the listener (its first piece starts the clock)."""
        if self.started is None:
            self.started = time.monotonic() if now is None else now
        self.seconds += seconds

    def due(self) -> float:
        """When the listener runs out of audio: its arrival before the first audio (most urgent)."""
        return self.arrived if self.started is None else self.started + self.seconds


class DecodeGate:
    """At most ``slots`` decodes at once, granted earliest due first (ties in arrival order).

    Without it every request's vocoder thread decodes at once and a new stream's first chunk
    shares the CPU with the steady chunks of streams that still have seconds of audio queued.
    """

    def __init__(self, slots: int = 1):
        self.slots = slots
        self._cond = threading.Condition()
        self._waiting: list[tuple[float, int]] = []
        self._order = itertools.count()
        self._running = 0
        self.granted: list[float] = []
        """Due times in the order turns were granted (the last 64; tests and debugging)."""

    @contextmanager
    def turn(self, due: float) -> Iterator[None]:
        ticket = (due, next(self._order))
        with self._cond:
            heapq.heappush(self._waiting, ticket)
            while self._running >= self.slots or self._waiting[0] != ticket:
                self._cond.wait()
            heapq.heappop(self._waiting)
            self._running += 1
            self.granted = [*self.granted[-63:], due]
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()


def decode_turn(gate: DecodeGate | None, clock: PlaybackClock) -> contextlib.AbstractContextManager[None]:
    """A vocoder's turn for its stream's next chunk (due when the listener runs out), or none without a gate."""
    return gate.turn(clock.due()) if gate is not None else contextlib.nullcontext()


def decode_slots() -> int:
    """Decodes that may run at once on the CPU: the cores this process may use, less one for the engine."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def vocoder_gate(policy: str, device: str, batched: bool) -> DecodeGate | None:
    """The vocoder's turn order on a CPU under ``deadline``: ``decode_slots()`` decodes at once,
    earliest due first; none under ``fifo`` or when chunks are batched (the batch needs them together)."""
    if policy not in POLICIES:
        raise ScheduleKnobError(f"factory_args.scheduler: {policy!r} is not allowed\n  rule: one of {', '.join(POLICIES)}\n  fix:  set the vocoder's factory_args.scheduler to deadline or fifo")
    if policy == "fifo" or batched or str(device).startswith("cuda"):
        return None
    return DecodeGate(decode_slots())
