"""A malformed reference recording reaching a model through the Python API (not only HTTP) is the
client's mistake naming ``ref_audio``, never a division by a zero sample rate or a reshape error."""

from __future__ import annotations

import io
import wave

import pytest
import torch

from omni_models.common.audio import reference_audio
from omni_models.higgs_tts_real.stages import reference_wave
from omni_runtime.errors import InvalidRequest


def _wav(rate: int = 16000, frames: int = 1600) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(b"\x01\x00" * frames)
    return out.getvalue()


def _rate_zero() -> bytes:
    data = bytearray(_wav())
    data[24:28] = (0).to_bytes(4, "little")
    return bytes(data)


@pytest.mark.parametrize("data", [_rate_zero(), _wav()[:101], _wav(frames=0), b"not audio at all"], ids=["rate 0", "odd truncation", "no frames", "not audio"])
def test_malformed_wav_bytes_are_an_invalid_request_naming_ref_audio(data):
    with pytest.raises(InvalidRequest) as caught:
        reference_audio({"ref_audio": data}, 24000)
    assert caught.value.param == "ref_audio"


def test_a_real_recording_is_resampled():
    assert reference_audio({"ref_audio": _wav()}, 24000).shape == (2400,)


@pytest.mark.parametrize(
    ("data", "param"),
    [
        ({"ref_audio": torch.zeros(2400)}, "ref_sample_rate"),
        ({"ref_audio": torch.zeros(2400), "ref_sample_rate": 0}, "ref_sample_rate"),
        ({"ref_audio": torch.zeros(1, 1, 2400), "ref_sample_rate": 24000}, "ref_audio"),
        ({"ref_audio": "not audio"}, "ref_audio"),
    ],
    ids=["tensor without rate", "rate 0", "3-d tensor", "a string"],
)
@pytest.mark.parametrize("read", [reference_audio, reference_wave], ids=["shared", "higgs"])
def test_a_malformed_tensor_reference_is_an_invalid_request_naming_the_field(read, data, param):
    """Every model reads ``ref_audio`` through one check, so each gives the client the same 400."""
    with pytest.raises(InvalidRequest) as caught:
        read(data, 24000)
    assert caught.value.param == param
