"""The espeak reference pipeline's engine and stages, driven in one process.

These run the real libespeak-ng: the audio checks are what a listener relies on
(speech is present, lasts as long as the words need, sits in the speech band,
arrives sentence by sentence in order at 24 kHz).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from omni_models.espeak import stages
from omni_models.espeak.config import EspeakConfig
from omni_models.espeak.engine import UnknownVoiceError, get_engine
from omni_models.espeak.resample import resample
from omni_runtime import StageConfigError, StagePayload


@dataclass
class RecordingContext:
    """The parts of StageContext a stage touches, recording what it emits."""

    request_id: str = "req-1"
    cancelled: bool = False
    upstream_payload: StagePayload | None = None
    emitted: list[dict[str, Any]] = field(default_factory=list)

    def emit(self, chunk: dict[str, Any]) -> None:
        self.emitted.append(chunk)


def _band_energy_fraction(audio: torch.Tensor, rate: int, low: float, high: float) -> float:
    power = torch.fft.rfft(audio.double()).abs() ** 2
    bins = torch.fft.rfftfreq(audio.shape[0], 1 / rate)
    band = (bins >= low) & (bins <= high)
    return float(power[band].sum() / power.sum())


def _voiced_pitches(audio: torch.Tensor, rate: int, frame_s: float = 0.04) -> list[float]:
    """Pitch (Hz) of each loud, clearly periodic frame, from its autocorrelation peak."""
    frame = int(rate * frame_s)
    frames = audio[: audio.shape[0] // frame * frame].double().reshape(-1, frame)
    loud = frames.pow(2).mean(dim=1).sqrt() > 0.5 * frames.pow(2).mean().sqrt()
    lo, hi = rate // 400, rate // 60
    pitches = []
    for x in frames[loud]:
        x = x - x.mean()
        corr = torch.stack([(x[:-lag] * x[lag:]).sum() for lag in range(lo, hi)]) / (x * x).sum()
        best = int(corr.argmax())
        if corr[best] > 0.5:
            pitches.append(rate / (lo + best))
    return pitches


def _run(text: str, **request: Any) -> tuple[RecordingContext, RecordingContext, StagePayload]:
    pre = stages.build_preprocessing()
    engine = stages.build_tts_engine()
    vocoder = stages.build_vocoder()
    prepared = pre.process(StagePayload("req-1", {"text": text, "voice": None, "speed": 1.0, **request}))
    engine_ctx = RecordingContext()
    engine_out = engine.process(prepared, engine_ctx)
    vocoder_ctx = RecordingContext(upstream_payload=engine_out)
    final = vocoder.consume(iter(engine_ctx.emitted), vocoder_ctx)
    return engine_ctx, vocoder_ctx, final


def test_engine_speaks_at_22050_hz_int16() -> None:
    speech = get_engine().synthesize("Hello world.")
    assert speech.sample_rate == 22_050
    assert speech.pcm.dtype == torch.int16
    assert 0.3 < speech.duration_s < 3.0
    assert int(speech.pcm.abs().max()) > 3_000


def test_longer_text_and_slower_speech_last_longer() -> None:
    engine = get_engine()
    short = engine.synthesize("Hello.").duration_s
    longer = engine.synthesize("Hello, this sentence has quite a few more words in it.").duration_s
    slow = engine.synthesize("Hello, this sentence has quite a few more words in it.", words_per_minute=100).duration_s
    assert longer > 2 * short
    assert slow > 1.4 * longer


def test_unknown_voice_names_the_voice() -> None:
    with pytest.raises(UnknownVoiceError, match="'no-such-voice' is not an espeak-ng voice"):
        get_engine().synthesize("Hello.", voice="no-such-voice")


def test_concurrent_calls_each_get_their_own_utterance() -> None:
    """libespeak-ng has one global callback: without the lock, threads would receive each other's audio."""
    engine = get_engine()
    # Lengths differ pairwise by far more than espeak's call-to-call variation (a few samples).
    texts = [
        "Yes.",
        "Good morning to you.",
        "This sentence is noticeably longer than the ones before it.",
        "And this final sentence is the longest of them all, by a comfortable margin, so mixing shows.",
    ]
    serial = [engine.synthesize(t).duration_s for t in texts]
    results: dict[int, float] = {}

    def work(i: int) -> None:
        for _ in range(3):
            results[i] = engine.synthesize(texts[i]).duration_s

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, seconds in enumerate(serial):
        assert results[i] == pytest.approx(seconds, rel=0.02), f"thread {i} got audio of another length"


def test_pipeline_streams_one_chunk_per_sentence_in_order() -> None:
    text = "The first sentence. Then a second, longer sentence follows it! Is this the third?"
    engine_ctx, vocoder_ctx, final = _run(text)
    sentences = [c["sentence"] for c in engine_ctx.emitted]
    assert sentences == ["The first sentence.", "Then a second, longer sentence follows it!", "Is this the third?"]
    assert [c["sentence_index"] for c in engine_ctx.emitted] == [0, 1, 2]
    engine = get_engine()
    for chunk in engine_ctx.emitted:
        alone = engine.synthesize(chunk["sentence"]).pcm
        # espeak varies by a few samples from call to call; each chunk is its own sentence's audio.
        assert chunk["pcm"].shape[0] == pytest.approx(alone.shape[0], rel=0.02)
    # The vocoder streams as sentences arrive: one piece per sentence plus the filter's tail.
    assert len(vocoder_ctx.emitted) == len(sentences) + 1
    assert final.data["num_sentences"] == 3


def test_vocoder_output_is_normalised_24khz_speech() -> None:
    engine_ctx, vocoder_ctx, final = _run("Good morning. The quick brown fox jumps over the lazy dog.")
    assert {c["sample_rate"] for c in vocoder_ctx.emitted} == {24_000}
    audio = torch.cat([c["audio"] for c in vocoder_ctx.emitted])
    assert audio.dtype == torch.float32 and audio.dim() == 1
    source = sum(c["pcm"].shape[0] for c in engine_ctx.emitted)
    assert audio.shape[0] == math.ceil(source * 24_000 / 22_050)
    assert final.data["sample_rate"] == 24_000 and final.data["num_samples"] == audio.shape[0]
    assert float(audio.abs().max()) <= 0.97 + 1e-6
    rms = float(audio.pow(2).mean().sqrt())
    assert rms > 0.02, "speech must not be near-silent"
    assert _band_energy_fraction(audio, 24_000, 80.0, 4_000.0) > 0.8
    # Speech, not noise: most loud frames are periodic with a voice's pitch.
    loud_frames = _voiced_pitches(audio, 24_000)
    assert len(loud_frames) >= 10
    median_pitch = sorted(loud_frames)[len(loud_frames) // 2]
    assert 70.0 <= median_pitch <= 300.0
    # Proper interpolation, not a rate change: the resampled pitch matches the source's.
    source_audio = torch.cat([c["pcm"] for c in engine_ctx.emitted]).float() / 32768
    reference = resample(source_audio, 22_050, 24_000)
    correlation = torch.corrcoef(torch.stack([audio, reference]))[0, 1]
    assert float(correlation) > 0.99


def test_openai_voice_names_map_to_espeak_voices() -> None:
    engine = stages.build_tts_engine()
    assert engine.voice_for(None) == "en-us"
    assert engine.voice_for("alloy") == "en-us"
    assert engine.voice_for("fable") == "en"
    assert engine.voice_for("en-GB-x-rp") == "en-GB-x-rp"
    _, vocoder_ctx, final = _run("Hello there.", voice="nova")
    assert final.data["voice"] == "en-us+f2"
    assert vocoder_ctx.emitted


def test_request_mistakes_fail_the_request_with_the_field() -> None:
    pre = stages.build_preprocessing()
    with pytest.raises(ValueError, match="nothing to speak"):
        pre.process(StagePayload("r", {"text": " ... "}))
    with pytest.raises(TypeError, match="'text' must be a string"):
        pre.process(StagePayload("r", {"text": None}))
    with pytest.raises(ValueError, match=r"speed 9.0 is outside \[0.25, 4.0\]"):
        pre.process(StagePayload("r", {"text": "Hi.", "speed": 9}))


def test_engine_without_preprocessed_payload_names_the_edge() -> None:
    with pytest.raises(ValueError, match="preprocessing -> tts_engine"):
        stages.build_tts_engine().process(StagePayload("r", {"text": "raw"}), RecordingContext())


def test_bad_default_voice_fails_at_build_time() -> None:
    with pytest.raises(StageConfigError, match="not an espeak-ng voice|must be installed with espeak-ng") as info:
        stages.build_tts_engine(default_voice="nope")
    assert (info.value.knob, info.value.value) == ("default_voice", "nope")  # a user's value: reported with its path, exit 1


def test_cancelled_request_stops_synthesising() -> None:
    prepared = stages.build_preprocessing().process(StagePayload("r", {"text": "One. Two. Three."}))
    ctx = RecordingContext(cancelled=True)
    stages.build_tts_engine().process(prepared, ctx)
    assert ctx.emitted == []


def test_config_class_matches_the_pipeline_file() -> None:
    config = EspeakConfig().load()
    assert config.stage_names == ("preprocessing", "tts_engine", "vocoder")
    assert {s.process for s in config.stages} == {"pipeline"}
    assert config.stage("tts_engine").stream_to == ["vocoder"]
    assert config.process_local_edges == EspeakConfig().process_local_edges() == []
    assert config.name == EspeakConfig.model_id
