"""The benchmark's listener: it plays each stream in real time from its first chunk.

A client that only timestamps chunks cannot tell a stream that played smoothly from one that
stuttered. This one keeps a playback clock per request: playback starts when the first audio
arrives; every chunk's audio is queued behind what is still playing; a chunk that arrives
after the queue ran dry is an *underrun* (the listener heard silence for the gap), and playback
resumes with that chunk. From the same clock comes the time to the first *audible* sample
(the first sample whose magnitude passes ``AUDIBLE``, at the moment it is played), which a
stream that opens with silence or a click-free fade-in reaches later than its first chunk.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

#: A sample at or above this magnitude (full scale 1.0, about -50 dBFS) counts as audible.
AUDIBLE = 0.003


@dataclass(frozen=True)
class Arrival:
    """One audio chunk as the client received it: when (seconds since submit), how long it
    plays, and the index of its first audible sample (None: silent throughout)."""

    at_s: float
    duration_s: float
    first_audible: int | None
    sample_rate: int


@dataclass(frozen=True)
class Playback:
    """What a listener of one stream experienced."""

    first_audio_s: float | None
    first_audible_s: float | None
    chunk_intervals_s: tuple[float, ...]
    underrun_events: int
    underrun_s: float
    audio_s: float


def first_audible_index(samples: Sequence[float] | object, threshold: float = AUDIBLE) -> int | None:
    """Index of the first sample with magnitude >= ``threshold`` in a 1-D (or ``[channels, n]``) array."""
    import numpy as np

    array = np.abs(np.asarray(samples, dtype=np.float32))
    if array.ndim > 1:
        array = array.max(axis=0)
    hits = np.flatnonzero(array >= threshold)
    return int(hits[0]) if hits.size else None


def play(arrivals: Sequence[Arrival]) -> Playback:
    """Replay the chunks on a real-time clock that starts with the first one."""
    if not arrivals:
        return Playback(None, None, (), 0, 0.0, 0.0)
    runs_dry = arrivals[0].at_s  # when the queued audio ends
    events = 0
    gap = 0.0
    audible = None
    for chunk in arrivals:
        if chunk.at_s > runs_dry:
            if chunk is not arrivals[0]:
                events += 1
                gap += chunk.at_s - runs_dry
            runs_dry = chunk.at_s
        if audible is None and chunk.first_audible is not None:
            audible = runs_dry + chunk.first_audible / chunk.sample_rate
        runs_dry += chunk.duration_s
    intervals = tuple(b.at_s - a.at_s for a, b in itertools.pairwise(arrivals))
    return Playback(arrivals[0].at_s, audible, intervals, events, gap, sum(c.duration_s for c in arrivals))
