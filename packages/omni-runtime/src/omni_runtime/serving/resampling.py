"""Audio at a client-chosen sample rate: the WebSocket's ``session.sample_rate``.

PyAV's resampler (ffmpeg's swresample) keeps its filter state across chunks, so a
segment's audio converted chunk by chunk equals the whole converted at once; one
converter per segment, flushed at its end.
"""

from __future__ import annotations

from typing import Any

from .audio import PcmAudio


class RateConverter:
    """A segment's audio at the session's ``sample_rate`` (PyAV's resampler, state kept across chunks)."""

    def __init__(self, source: int, target: int, channels: int) -> None:
        import av

        self.source, self.target, self.channels = source, target, channels
        self.layout = "mono" if channels == 1 else "stereo"
        self._av = av
        self._resampler = av.AudioResampler(format="s16", layout=self.layout, rate=target)

    def _out(self, frames: list[Any]) -> PcmAudio:
        import numpy as np

        arrays = [f.to_ndarray().reshape(-1, self.channels) for f in frames]
        samples = np.concatenate(arrays) if arrays else np.zeros((0, self.channels), np.int16)
        return PcmAudio(samples.astype(np.int16, copy=False), self.target)

    def feed(self, part: PcmAudio) -> PcmAudio:
        frame = self._av.AudioFrame.from_ndarray(part.samples.reshape(1, -1), format="s16", layout=self.layout)
        frame.sample_rate = self.source
        return self._out(self._resampler.resample(frame))

    def finish(self) -> PcmAudio:
        return self._out(self._resampler.resample(None))
