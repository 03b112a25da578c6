"""The embedded default, as a user meets it: ``omni synthesize "..." -o out.wav`` with no model
named runs the espeak reference pipeline and writes real speech at 24 kHz mono; a split
topology given as dotted overrides writes the same utterance."""

from __future__ import annotations

from pathlib import Path

import soundfile as sf

from e2e_support import expected_seconds, omni

TEXT = "Hello. This is the omni reference pipeline, speaking two sentences."


def _check_wav(path: Path) -> float:
    info = sf.info(str(path))
    assert (info.samplerate, info.channels, info.subtype) == (24_000, 1, "PCM_16")
    audio, _ = sf.read(str(path), dtype="float32")
    assert float((audio**2).mean() ** 0.5) > 0.02, "speech must not be near-silent"
    expected = expected_seconds(TEXT)
    assert 0.5 * expected <= info.duration <= 1.6 * expected + 0.5
    return info.duration


def test_synthesize_without_a_model_uses_espeak_and_a_split_topology_matches(tmp_path: Path) -> None:
    default = omni("synthesize", TEXT, "-o", "hello.wav", "--device", "cpu", cwd=tmp_path)
    assert default.returncode == 0, default.stderr
    assert "pipeline : preprocessing, tts_engine, vocoder" in default.stderr  # the topology table
    assert "wrote hello.wav" in default.stdout and "24000 Hz" in default.stdout
    default_s = _check_wav(tmp_path / "hello.wav")

    split = omni(
        "synthesize", TEXT, "-o", "split.wav", "--stages.tts_engine.process", "engine", "--stages.vocoder.process", "vocoder",
        cwd=tmp_path,
    )
    assert split.returncode == 0, split.stderr
    table = {line.split(":")[0].strip(): line.split(":")[1].strip() for line in split.stderr.splitlines() if " : " in line}
    assert table == {"pipeline": "preprocessing", "engine": "tts_engine", "vocoder": "vocoder"}
    # libespeak-ng varies by a few samples between calls; the utterance is the same.
    assert abs(_check_wav(tmp_path / "split.wav") - default_s) < 0.02 * default_s
