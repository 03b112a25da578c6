"""The embedded default, as a user meets it: ``omni synthesize "..." -o out.wav`` with no model
named runs the espeak reference pipeline and writes real speech at 24 kHz mono; a split
topology given as dotted overrides writes the same utterance."""

from __future__ import annotations

from pathlib import Path

import pytest
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


# Each test is one `omni synthesize` run: a CLI process that spawns the pipeline's workers.
pytestmark = pytest.mark.timeout(300)


def test_synthesize_without_a_model_uses_espeak(tmp_path: Path) -> None:
    result = omni("synthesize", TEXT, "-o", "hello.wav", "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "pipeline : preprocessing, tts_engine, vocoder" in result.stderr  # the topology table
    assert "wrote hello.wav" in result.stdout and "24000 Hz" in result.stdout
    _check_wav(tmp_path / "hello.wav")


def test_synthesize_in_a_split_topology_writes_the_same_utterance(tmp_path: Path) -> None:
    split = omni(
        "synthesize",
        TEXT,
        "-o",
        "split.wav",
        "--stages.tts_engine.process",
        "engine",
        "--stages.vocoder.process",
        "vocoder",
        cwd=tmp_path,
    )
    assert split.returncode == 0, split.stderr
    table = {line.split(":")[0].strip(): line.split(":")[1].strip() for line in split.stderr.splitlines() if " : " in line}
    assert table == {"pipeline": "preprocessing", "engine": "tts_engine", "vocoder": "vocoder"}
    # The same text straight through libespeak-ng (it varies by a few samples between calls).
    from omni_models.espeak.engine import get_engine
    from omni_models.espeak.normalize import prepare

    source = sum(get_engine().synthesize(s).pcm.shape[0] for s in prepare(TEXT).sentences)
    assert abs(_check_wav(tmp_path / "split.wav") - source / 22_050) < 0.02 * source / 22_050


@pytest.mark.parametrize("command", [["synthesize", "hello", "-o", "x.wav"], ["serve", "--port", "0"]])
def test_a_voice_espeak_does_not_have_is_a_user_error(command: list[str], tmp_path: Path) -> None:
    """The type check before start cannot know which voices are installed; the factory can: one
    error with the path, the value, the rule and the fix, exit 1, no worker traceback (issue 21)."""
    result = omni(*command, "--device", "cpu", "--stages.tts_engine.factory_args.default_voice", "xx-nope", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    err = result.stderr
    assert "error: stages.tts_engine.factory_args.default_voice = 'xx-nope'" in err
    assert "rule: the voice must be installed with espeak-ng" in err and "fix:  use an espeak-ng voice name such as 'en-us'" in err
    assert err.count("error:") == 1 and "Traceback" not in err
    assert not (tmp_path / "x.wav").exists()
