"""The PCM value every audio path shares: 16-bit samples, the error for what is not audio, a WAV header.

Its own module, below both :mod:`.audio` (conversion from a stage's output, whole
files) and :mod:`.encoders` (compressed formats), so that neither imports the
other to name the value they pass (``audio.encode`` calls the encoders for the
compressed formats; the encoders write WAV headers). :mod:`.audio` re-exports
these names.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np


class AudioError(ValueError):
    """A stage produced something that is not audio under the stage contract."""


@dataclass(frozen=True)
class PcmAudio:
    """Interleaved signed 16-bit samples and what a container needs to describe them."""

    samples: np.ndarray
    """int16, shape ``[frames, channels]``."""
    sample_rate: int

    @property
    def channels(self) -> int:
        return int(self.samples.shape[1])

    @property
    def frames(self) -> int:
        return int(self.samples.shape[0])

    def to_bytes(self) -> bytes:
        return self.samples.astype("<i2", copy=False).tobytes()


def wav_header(sample_rate: int, channels: int, data_bytes: int | None = None) -> bytes:
    """A 44-byte PCM16 WAV header; ``data_bytes=None`` gives the streaming form.

    The streaming form writes 0 in both size fields: ffmpeg (so browsers and
    PyAV) reads such a file to the end of the stream, and no reader mistakes
    it for the 24-hour file that the 0xFFFFFFFF convention describes.
    """
    block_align = channels * 2
    data_size = data_bytes or 0
    riff_size = 36 + data_bytes if data_bytes is not None else 0
    return (
        b"RIFF"
        + struct.pack("<I", riff_size)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<IHHIIHH", 16, 1, channels, sample_rate, sample_rate * block_align, block_align, 16)
        + b"data"
        + struct.pack("<I", data_size)
    )
