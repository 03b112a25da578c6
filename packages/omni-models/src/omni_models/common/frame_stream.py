"""One request's frames as the scheduler decodes them, grouped into the chunks its listener needs.

``FrameStream`` is the caller's side of ``StepScheduler.submit``: the scheduler thread puts
frames, the stage's thread iterates them in groups (streaming chunks). How big each group is,
and whether a stream must step now or may sit out a step, follow the stream's playback clock:
those rules live here, next to the clock they read, so the scheduler only asks
(``_needs_steps``, ``_can_wait``) and steps.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .playback import NOT_DUE, PlaybackClock

#: Share of the frames a stream could make before its listener runs dry that its next chunk holds.
FIT_SHARE = 0.5

class _End:
    """Marks the end of a frame stream (finished or cancelled)."""


_END = _End()


class FrameStream:
    """One request's frames ``[K]`` (int64, CPU) as the scheduler decodes them.

    The scheduler hands frames over in groups: with ``chunking=(first, size)`` a group is a
    streaming chunk (``first`` frames, then ``size`` each, the rest at the end), so the
    caller's thread wakes once per chunk instead of once per decode step; without it, every
    frame as soon as it is decoded. Iterate frames (``for frame in stream``) or the groups
    (``chunks()``, ``[K, n]`` tensors). Iteration ends when the request finishes or is
    cancelled and raises the scheduler's error (a failed prefill, a passed deadline).
    ``cancel()`` takes the request out of the batch (a caller that stops early must call it;
    ``AREngine`` does).
    """

    def __init__(self, cancelled: Callable[[], bool], deadline: float | None, chunking: tuple[int, int] | None = None, frame_rate: float | None = None):
        self._cancelled = cancelled
        self.deadline = deadline
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.streaming = chunking is not None
        self._target, self._size = chunking or (1, 1)
        self._ramp = False
        self._fit_margin: float | None = None
        self._made = 0
        self._first_frame_at: float | None = None
        self._held: list[list[int]] = []
        self._frames: list[list[int]] = []
        self.abandoned = False
        self.done = False
        self.frame_rate = frame_rate
        self.clock = PlaybackClock()
        self.chunk_sizes: list[int] = []
        """Frames in each group handed over so far (what the load-adaptive first chunk chose)."""

    def start_small(self, first: int, step_s: float = 0.0) -> None:
        """Scheduler thread, at admission to a busy engine: a first chunk of ``first`` frames, then
        chunks that double until they reach the stream's chunk size; only while the engine's
        steps (``step_s`` each) make the next chunk, twice this one, in at most ``FIT_SHARE`` of
        the audio this one holds. A slower engine keeps the idle first chunk: on the Qwen3-TTS
        12 Hz talker (80 ms frames, ~40 ms batched steps on 2 CPU cores) a 1-frame first chunk
        ran dry before the 2-frame one was made, and most streams at concurrency 8 underran."""
        if not self.streaming or first >= self._target:
            return
        if self.frame_rate and 2 * step_s > FIT_SHARE / self.frame_rate:
            return
        self._target, self._ramp = first, True

    def fit_to_playback(self, margin: float) -> None:
        """Size each chunk after the first to its listener's playback clock (``_fitted``)."""
        if self.streaming and self.frame_rate:
            self._fit_margin = margin

    def due(self, margin: float = 0.0) -> float:
        """When this request's next frames are needed: a stream's arrival until it has its first
        chunk, then (frame rate known) when its listener runs out of audio; ``NOT_DUE`` otherwise."""
        if not self.streaming:
            return NOT_DUE
        if self.clock.started is None:
            return self.clock.arrived
        return self.clock.due() - margin if self.frame_rate else NOT_DUE

    def frames_to_next_chunk(self) -> int:
        """Frames this stream must still make before its next group is handed over."""
        return max(1, self._target - len(self._held))

    def is_cancelled(self) -> bool:
        return self.abandoned or bool(self._cancelled())

    def cancel(self) -> None:
        self.abandoned = True

    def _put(self, frame: list[int]) -> None:
        """Scheduler thread: hold the frame until its group is complete."""
        self._made += 1
        if self._first_frame_at is None:
            self._first_frame_at = time.monotonic()
        self._held.append(frame)
        if len(self._held) >= self._target:
            self._hand_over()

    def _hand_over(self) -> None:
        n = len(self._held)
        self.chunk_sizes.append(n)
        self.clock.played(n / self.frame_rate if self.frame_rate else 0.0)
        self._queue.put(self._held)
        self._held = []
        if self._fit_margin is not None:  # one frame tells no rate yet: double it
            self._target = self._fitted(n) if self._made > 1 else min(self._size, 2 * n)
            return
        self._target = min(self._size, 2 * n) if self._ramp else self._size
        self._ramp = self._ramp and self._target < self._size

    def _fitted(self, last: int) -> int:
        """Half the frames this stream makes before its listener's audio runs out (less the margin):
        the chunk arrives with time to spare and the listener's buffer grows by the rest, so
        chunks grow with it; full chunks when the stream is slower than real time.

        Never smaller than the last chunk (``last`` frames), and twice it when the listener is
        already inside the margin: chunks that shrank there (to 1 frame) only multiplied the
        vocoder's decodes and the hops per second of audio, the stream stayed inside the margin,
        and on a busy CPU the vocoder fell behind every stream at once (Higgs-TTS on 2 cores:
        underruns from 1.25 requests/s under deadline, none to 3.5/s under fifo)."""
        now = time.monotonic()
        made_for = now - self._first_frame_at
        rate = (self._made - 1) / made_for if made_for > 0 else 0.0  # frames per second since the first
        if rate < self.frame_rate:
            return self._size  # it cannot keep up: underruns come anyway, full chunks cost the vocoder least
        fit = int(FIT_SHARE * rate * (self.clock.due() - self._fit_margin - now))
        if fit < 1:
            return min(self._size, 2 * last)
        return min(self._size, max(last, fit))

    def _finish(self, error: BaseException | None = None) -> None:
        if not self.done:
            self.done = True
            if self._held and error is None:
                self._hand_over()
            self._held = []
            self._queue.put(error if error is not None else _END)

    def _next_group(self) -> list[list[int]] | None:
        item = self._queue.get()
        if isinstance(item, _End):
            self._queue.put(item)  # iterating again stays at the end
            return None
        if isinstance(item, BaseException):
            self._queue.put(_END)
            raise item
        return item

    def chunks(self) -> Iterator[torch.Tensor]:
        """The groups as ``[K, n]`` code tensors, in order."""
        while (group := self._next_group()) is not None:
            yield torch.tensor(group).T

    def __iter__(self) -> Iterator[torch.Tensor]:
        return self

    def __next__(self) -> torch.Tensor:
        if not self._frames:
            group = self._next_group()
            if group is None:
                raise StopIteration
            self._frames = group[::-1]
        return torch.tensor(self._frames.pop())


def _needs_steps(stream: FrameStream, now: float, margin: float, step_s: float) -> bool:
    """A stream must step now: it awaits its first chunk, or its listener runs out (less
    ``margin`` for the vocoder and the wire) before the steps its next chunk still needs can run
    (``step_s`` each). Counting those steps is what keeps a stream that sat out from resuming too
    late: a 12-frame chunk at 10 ms a step needs 120 ms, more than a 0.1 s margin."""
    return stream.due(margin) - stream.frames_to_next_chunk() * step_s <= now


def _can_wait(stream: FrameStream, now: float, margin: float, step_s: float) -> bool:
    """A started stream whose listener holds more audio than the margin and its next chunk's
    steps take (its frame rate known: without it nobody can tell, so it never waits)."""
    return stream.clock.started is not None and bool(stream.frame_rate) and not _needs_steps(stream, now, margin, step_s)
