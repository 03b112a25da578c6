"""The vocoder's streaming resampler (libsoxr) and level normaliser."""

from __future__ import annotations

import math

import pytest
import torch

from omni_models.espeak.level import LevelNormalizer, dbfs_to_linear
from omni_models.espeak.resample import StreamingResampler, resample


def _tone(freq: float, rate: int, seconds: float = 1.0, amplitude: float = 0.5) -> torch.Tensor:
    t = torch.arange(int(rate * seconds), dtype=torch.float64) / rate
    return (amplitude * torch.sin(2 * math.pi * freq * t)).to(torch.float32)


def _spectrum_peak_and_purity(signal: torch.Tensor, rate: int, freq: float) -> tuple[float, float]:
    """Frequency of the spectral peak and the dB ratio of energy near ``freq`` to everything else."""
    x = signal.double() * torch.hann_window(signal.shape[0], dtype=torch.float64)
    power = torch.fft.rfft(x).abs() ** 2
    bins = torch.fft.rfftfreq(signal.shape[0], 1 / rate)
    near = (bins - freq).abs() < 30
    return float(bins[power.argmax()]), 10 * math.log10(float(power[near].sum() / power[~near].sum()))


def test_chunked_stream_matches_one_shot_resampling() -> None:
    signal = torch.randn(50_000, generator=torch.Generator().manual_seed(3))
    whole = resample(signal, 22_050, 24_000)
    stream = StreamingResampler(22_050, 24_000)
    parts, start = [], 0
    for size in (1, 7, 100, 3_000, 17, 20_000, 26_875):
        parts.append(stream.process(signal[start : start + size]))
        start += size
    parts.append(stream.flush())
    chunked = torch.cat(parts)
    assert chunked.shape == whole.shape
    torch.testing.assert_close(chunked, whole, rtol=0, atol=1e-5)


@pytest.mark.parametrize("length", [0, 1, 147, 22_050, 22_051])
def test_output_length_follows_the_rate_ratio(length: int) -> None:
    out = resample(torch.zeros(length), 22_050, 24_000)
    assert out.shape[0] == math.ceil(length * 24_000 / 22_050)


@pytest.mark.parametrize("freq", [220.0, 1_000.0, 3_500.0, 7_000.0])
def test_tones_keep_their_frequency_and_amplitude(freq: float) -> None:
    out = resample(_tone(freq, 22_050), 22_050, 24_000)
    peak, purity = _spectrum_peak_and_purity(out[2_000:-2_000], 24_000, freq)
    assert abs(peak - freq) < 2.0
    # Nearest-sample resampling of the same tone stays far below this (its jitter spreads energy).
    assert purity > 60.0
    rms = float(out[2_000:-2_000].pow(2).mean().sqrt())
    assert rms == pytest.approx(0.5 / math.sqrt(2), rel=1e-3)


def test_nearest_sample_resampling_would_fail_the_purity_bound() -> None:
    """Guards the bound above: it separates a real interpolator from index rounding."""
    tone = _tone(3_500.0, 22_050)
    index = torch.clamp((torch.arange(24_000) * 22_050 / 24_000).round().long(), max=tone.shape[0] - 1)
    _, purity = _spectrum_peak_and_purity(tone[index][2_000:-2_000], 24_000, 3_500.0)
    assert purity < 60.0


def test_downsampling_removes_content_above_the_new_nyquist() -> None:
    out = resample(_tone(18_000.0, 48_000) + _tone(1_000.0, 48_000), 48_000, 24_000)
    _, purity = _spectrum_peak_and_purity(out[2_000:-2_000], 24_000, 1_000.0)
    assert purity > 50.0


def test_process_after_flush_is_refused() -> None:
    stream = StreamingResampler(22_050, 24_000)
    stream.flush()
    with pytest.raises(RuntimeError, match="after flush"):
        stream.process(torch.zeros(10))


def test_quiet_speech_is_raised_to_the_target_level() -> None:
    normalizer = LevelNormalizer(24_000, target_rms_dbfs=-20.0)
    quiet = _tone(300.0, 24_000, amplitude=0.03)
    out = normalizer.apply(quiet)
    measured = normalizer.active_rms(out)
    assert measured is not None
    assert 20 * math.log10(measured) == pytest.approx(-20.0, abs=0.5)


def test_loud_audio_is_limited_by_the_peak_ceiling() -> None:
    normalizer = LevelNormalizer(24_000, target_rms_dbfs=-3.0, peak_ceiling=0.9)
    out = normalizer.apply(_tone(300.0, 24_000, amplitude=0.8))
    assert float(out.abs().max()) == pytest.approx(0.9, abs=1e-4)


def test_silence_and_pauses_do_not_set_the_gain() -> None:
    normalizer = LevelNormalizer(24_000, target_rms_dbfs=-20.0)
    silence = torch.zeros(24_000)
    assert torch.equal(normalizer.apply(silence), silence)
    speech = _tone(300.0, 24_000, amplitude=0.05)
    with_pause = torch.cat([speech, torch.zeros(48_000)])
    assert normalizer.gain_for(with_pause) == pytest.approx(normalizer.gain_for(speech), rel=1e-3)
    assert normalizer.gain_for(speech) == pytest.approx(dbfs_to_linear(-20.0) / (0.05 / math.sqrt(2)), rel=1e-2)
