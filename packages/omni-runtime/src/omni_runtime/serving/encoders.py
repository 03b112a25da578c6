"""Compressed containers (mp3, opus, aac, flac) through PyAV, whole or chunk by chunk.

PyAV wraps ffmpeg's encoders and muxers, so the bytes are what any player
expects (ffmpeg is the reference for these formats). For streaming, the muxer
writes into a non-seekable sink that the server drains after every chunk: the
client receives each encoded frame as soon as the encoder releases it, and the
container is one a reader can decode from its first byte (MP3 frames, Ogg pages
every 20 ms, ADTS frames, FLAC frames after a header without a total length).
WAV and raw PCM need no encoder and are handled in :mod:`.audio`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from .pcm import AudioError, PcmAudio, wav_header


@dataclass(frozen=True)
class _Codec:
    container: str
    codec: str
    rate: int | None = None
    """A fixed output rate (Opus encodes at 48 kHz); None keeps the input's."""
    bit_rate: int | None = None
    options: tuple[tuple[str, str], ...] = ()


_CODECS = {
    "mp3": _Codec("mp3", "libmp3lame", bit_rate=96_000),
    "opus": _Codec("ogg", "libopus", rate=48_000, bit_rate=48_000, options=(("page_duration", "20000"),)),
    "aac": _Codec("adts", "aac", bit_rate=96_000),
    "flac": _Codec("flac", "flac"),
}


class _Sink:
    """A write-only, non-seekable file for the muxer; :meth:`take` drains what it wrote."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._parts.append(chunk)
        return len(chunk)

    def take(self) -> bytes:
        out, self._parts = b"".join(self._parts), []
        return out


class StreamEncoder:
    """Encode one response: :meth:`feed` each chunk, then :meth:`finish`; each returns bytes to send."""

    def __init__(self, fmt: str, sample_rate: int, channels: int, *, seekable: io.BytesIO | None = None) -> None:
        self.fmt, self.sample_rate, self.channels = fmt, sample_rate, channels
        self._started = False
        if fmt in ("wav", "pcm"):
            self._container = None
            return
        if fmt not in _CODECS:
            raise AudioError(f"unsupported audio format {fmt!r}")
        import av

        spec = _CODECS[fmt]
        layout = "mono" if channels == 1 else "stereo" if channels == 2 else None
        if layout is None:
            raise AudioError(f"{fmt} output supports 1 or 2 channels, got {channels}")
        self._sink = seekable if seekable is not None else _Sink()
        self._container = av.open(self._sink, mode="w", format=spec.container, options=dict(spec.options))
        self._stream = self._container.add_stream(spec.codec, rate=spec.rate or sample_rate, layout=layout)
        if spec.bit_rate:
            self._stream.bit_rate = spec.bit_rate
        target = self._stream.codec_context.format.name if self._stream.codec_context.format else "s16"
        self._resampler = av.AudioResampler(format=target, layout=layout, rate=spec.rate or sample_rate)
        self._layout = layout

    def feed(self, audio: PcmAudio) -> bytes:
        if audio.sample_rate != self.sample_rate or audio.channels != self.channels:
            raise AudioError("streamed audio chunks changed sample rate or channel count mid-stream")
        if self._container is None:
            head = b""
            if not self._started and self.fmt == "wav":
                head = wav_header(self.sample_rate, self.channels)
            self._started = True
            return head + audio.to_bytes()
        import av

        frame = av.AudioFrame.from_ndarray(audio.samples.reshape(1, -1), format="s16", layout=self._layout)
        frame.sample_rate = self.sample_rate
        for converted in self._resampler.resample(frame):
            self._mux(converted)
        return self._drain()

    def finish(self) -> bytes:
        if self._container is None:
            return wav_header(self.sample_rate, self.channels) if self.fmt == "wav" and not self._started else b""
        for converted in self._resampler.resample(None):
            self._mux(converted)
        self._mux(None)
        self._container.close()
        return self._drain()

    def _mux(self, frame: Any) -> None:
        for packet in self._stream.encode(frame):
            self._container.mux(packet)

    def _drain(self) -> bytes:
        return self._sink.take() if isinstance(self._sink, _Sink) else b""


def encode_file(audio: PcmAudio, fmt: str) -> bytes:
    """A whole file: the muxer may seek back (FLAC then records its total length and checksum)."""
    buffer = io.BytesIO()
    encoder = StreamEncoder(fmt, audio.sample_rate, audio.channels, seekable=buffer)
    encoder.feed(audio)
    encoder.finish()
    return buffer.getvalue()
