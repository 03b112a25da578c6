"""Audio encoding: the bytes a client gets for contract audio (float tensors in [-1, 1])."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile
import torch

from omni_runtime.serving.audio import AudioError, concat, encode, to_pcm16, wav_header


def test_pcm16_clips_scales_and_rounds():
    audio = torch.tensor([0.0, 0.5, -0.5, 1.0, -1.0, 1.7, -3.0, 1e-5], dtype=torch.float32)
    pcm = to_pcm16(audio, 24000)
    assert pcm.samples.dtype == np.int16 and pcm.samples.shape == (8, 1)
    assert pcm.samples[:, 0].tolist() == [0, 16384, -16384, 32767, -32767, 32767, -32767, 0]


def test_channels_first_audio_is_interleaved():
    left = torch.full((3,), 0.25)
    right = torch.full((3,), -0.25)
    pcm = to_pcm16(torch.stack([left, right]), 48000)
    assert pcm.channels == 2 and pcm.frames == 3
    assert np.frombuffer(pcm.to_bytes(), "<i2").tolist() == [8192, -8192] * 3


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_other_float_dtypes_are_accepted(dtype):
    pcm = to_pcm16(torch.tensor([0.5, -0.25], dtype=dtype), 16000)
    assert pcm.samples[:, 0].tolist() == [16384, -8192]


@pytest.mark.parametrize(
    ("audio", "rate", "message"),
    [
        (torch.zeros(2, 2, 2), 16000, "shaped [samples] or [channels, samples]"),
        (torch.tensor([0.0, float("nan")]), 16000, "NaN or infinite"),
        (torch.tensor([1, 2], dtype=torch.int16), 16000, "floating point"),
        ([0.0, 0.1], 16000, "tensor or array"),
        (torch.zeros(4), 0, "positive int"),
        (torch.zeros(4), 16000.0, "positive int"),
    ],
)
def test_non_audio_is_rejected_with_the_reason(audio, rate, message):
    with pytest.raises(AudioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        to_pcm16(audio, rate)


def test_wav_and_flac_decode_to_the_same_samples():
    t = torch.arange(2400, dtype=torch.float32) / 24000
    pcm = to_pcm16(0.3 * torch.sin(2 * torch.pi * 300 * t), 24000)
    for fmt in ("wav", "flac"):
        decoded, rate = soundfile.read(io.BytesIO(encode(pcm, fmt)), dtype="int16")
        assert rate == 24000
        np.testing.assert_array_equal(decoded, pcm.samples[:, 0])
    assert encode(pcm, "pcm") == pcm.to_bytes()
    with pytest.raises(AudioError, match="unsupported audio format 'ogg'"):
        encode(pcm, "ogg")


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac"])
def test_compressed_formats_stream_chunk_by_chunk_and_decode(fmt):
    """Encoded bytes come out while audio goes in (not all at the end), and the result is one playable file."""
    import av

    from omni_runtime.serving.encoders import StreamEncoder

    t = torch.arange(24000, dtype=torch.float32) / 24000
    pcm = to_pcm16(0.3 * torch.sin(2 * torch.pi * 300 * t), 24000)
    encoder = StreamEncoder(fmt, 24000, 1)
    pieces = [encoder.feed(type(pcm)(pcm.samples[i : i + 2400], 24000)) for i in range(0, 24000, 2400)]
    pieces.append(encoder.finish())
    assert sum(1 for p in pieces[:-1] if p) >= 5, [len(p) for p in pieces]
    with av.open(io.BytesIO(b"".join(pieces))) as container:
        rate = container.streams.audio[0].rate
        frames = sum(frame.samples for frame in container.decode(audio=0))
    assert frames >= 24000 * rate // 24000


def test_streaming_wav_header_marks_unknown_length():
    """Sizes 0 ("read to the end"), not 0xFFFFFFFF, which readers take for a 24-hour file."""
    header = wav_header(22050, 2)
    assert len(header) == 44 and header[4:8] == b"\x00\x00\x00\x00" and header[40:44] == b"\x00\x00\x00\x00"
    assert wav_header(22050, 2, 400)[40:44] == (400).to_bytes(4, "little")


def test_concat_rejects_chunks_that_change_format():
    a, b = to_pcm16(torch.zeros(4), 16000), to_pcm16(torch.zeros(4), 24000)
    assert concat([a, a]).frames == 8
    with pytest.raises(AudioError, match="chunks disagree"):
        concat([a, b])
    with pytest.raises(AudioError, match="no audio"):
        concat([])
