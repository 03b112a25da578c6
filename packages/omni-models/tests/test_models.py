"""Every model's stages, driven in-process: audio format, codebook layout, duration bounds,
determinism, cancellation and the payload contents of each handoff."""

import importlib
import io
import math
import wave

import pytest
import torch
from helpers import FakeCtx, StagePayload, build_stages, pipeline_file, synthesize, topology
from models_table import CASES, IDS

from omni_config import load_config

SHORT = "Hello there."
LONG = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def built():
    cache = {}

    def get(case, **kw):
        key = (case.folder, case.variant, tuple(sorted(kw.items())))
        if key not in cache:
            overrides = {name: kw for name in _weight_stages(case)} if kw else None
            cache[key] = build_stages(case.folder, case.variant, overrides)
        return cache[key]

    return get


def _stages_module(case):
    """Where the model's numbers live: its catalog row (codec-token models) or its own stages module."""
    from omni_models.common.catalog import MODELS

    row = next((spec for spec in MODELS if spec.name == case.folder), None)
    return row if row is not None else importlib.import_module(f"omni_models.{case.folder}.stages")


def _weight_stages(case):
    return [s.name for s in topology(case.folder, case.variant).stages if "load_format" in s.factory_args]


def _run(case, built, text=SHORT, request_id="req-1", **fields):
    data = {"text": text, "voice": None, "speed": 1.0, "response_format": "wav", "stream": True, **fields}
    return synthesize(case.folder, data, variant=case.variant, stages=built(case), request_id=request_id)


def _frame_rate(case):
    mod = _stages_module(case)
    for name in ("codec", "CODEC", "VAE"):
        if hasattr(mod, name):
            return getattr(mod, name).frame_rate
    return mod.TOKEN_RATE


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_audio_has_the_models_sample_rate_channels_and_range(case, built):
    result = _run(case, built)
    assert result.sample_rate == case.sample_rate
    audio = result.audio
    assert audio.dtype == torch.float32
    assert audio.dim() == (1 if case.channels == 1 else 2)
    if case.channels > 1:
        assert audio.shape[0] == case.channels
    assert torch.isfinite(audio).all() and audio.abs().max() <= 1.0 and audio.abs().max() > 0
    assert len(result.chunks) > 1, "the vocoder streams audio in several chunks"
    final = result.final.data
    assert final["sample_rate"] == case.sample_rate and final["channels"] == case.channels
    assert final["num_samples"] == audio.shape[-1]
    # whole codec frames: samples are a multiple of the hop
    hop = case.sample_rate / _frame_rate(case)
    assert audio.shape[-1] % round(hop) == 0


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_engine_generates_the_models_codebook_layout(case, built):
    result = _run(case, built)
    if case.streams:
        chunks = result.emitted[case.engine]
        assert len(chunks) > 1
        key = "codes" if case.codebooks is not None else "latents"
        codes = torch.cat([c[key] for c in chunks], dim=1)
        starts = [c["start_frame"] for c in chunks]
        assert starts == sorted(starts) and starts[0] == 0
        # the first chunk is the small low-latency one (the deadline scheduler sizes later chunks to
        # the listener's playback clock, so they may be smaller still on a loaded machine)
        knobs = load_config(pipeline_file(case.folder, case.variant)).stage(case.engine).factory_args
        assert chunks[0][key].shape[1] <= min(knobs["first_chunk_frames"], knobs["chunk_frames"]), "first chunk is the small low-latency one"
    else:
        codes = result.trace[case.engine].data["codes"]
    if case.codebooks is None:
        assert codes.dtype == torch.float32 and codes.shape[0] == _stages_module(case).VAE.latent_dim
        return
    assert codes.dtype == torch.int64 and codes.shape[0] == case.codebooks
    mod = _stages_module(case)
    size = (mod.ar if hasattr(mod, "ar") else mod.AR).codebook_size
    assert codes.min() >= 0 and codes.max() < size
    # different codebooks carry different code streams
    assert case.codebooks == 1 or not torch.equal(codes[0], codes[-1])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_duration_follows_text_length_within_bounds(case, built):
    rate = _frame_rate(case)
    durations = []
    for text in (SHORT, LONG):
        result = _run(case, built, text=text)
        seconds = result.audio.shape[-1] / case.sample_rate
        expected = len(text) / 15.0
        assert 0.8 * expected - 1.0 / rate <= seconds <= 1.2 * expected + 1.0 / rate, (text, seconds, expected)
        durations.append(seconds)
    assert durations[1] > 2.5 * durations[0]
    fast = _run(case, built, text=LONG, speed=2.0).audio.shape[-1] / case.sample_rate
    assert fast < durations[1] * 0.7


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_synthesis_is_deterministic_under_the_seeds(case, built):
    a = _run(case, built).audio
    b = _run(case, built, request_id="another-id").audio
    assert torch.equal(a, b), "same request, same audio (request ids do not matter)"
    c = _run(case, built, seed=7).audio
    assert not torch.equal(a[..., : c.shape[-1]], c[..., : a.shape[-1]]), "the request seed changes the sample"
    other = synthesize(case.folder, {"text": SHORT}, variant=case.variant, stages=built(case, seed=99)).audio
    assert not torch.equal(a[..., : other.shape[-1]], other[..., : a.shape[-1]]), "the weight seed changes the weights"


CLONING = [c for c in CASES if c.variant == "pipeline" and c.folder != "voxtral_tts"]


def test_voxtral_rejects_reference_audio_instead_of_ignoring_it(built):
    case = next(c for c in CASES if c.folder == "voxtral_tts")
    with pytest.raises(ValueError, match="voxtral_tts does not clone voices from ref_audio"):
        _run(case, built, ref_audio=torch.zeros(2400), ref_sample_rate=24000)


@pytest.mark.parametrize("case", CLONING, ids=lambda c: c.model_id)
def test_voice_and_reference_audio_change_the_output(case, built):
    base = _run(case, built).audio
    voiced = _run(case, built, voice="nova").audio
    assert not torch.equal(base[..., :1000], voiced[..., :1000])
    ref = (0.3 * torch.sin(torch.arange(24000) / 24000 * 2 * math.pi * 220)).to(torch.float32)
    cloned = _run(case, built, ref_audio=ref, ref_sample_rate=24000).audio
    assert not torch.equal(base[..., :1000], cloned[..., :1000])
    # the same recording as 16-bit WAV bytes is accepted too
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(24000)
        w.writeframes((ref * 32767).to(torch.int16).numpy().tobytes())
    from_wav = _run(case, built, ref_audio=buf.getvalue()).audio
    assert from_wav.shape[-1] > 0


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_user_errors_name_the_problem(case, built):
    with pytest.raises(ValueError, match="unknown voice 'zzz'"):
        _run(case, built, voice="zzz")
    with pytest.raises(ValueError, match="speed 9"):
        _run(case, built, speed=9)
    with pytest.raises(ValueError, match="empty after normalisation"):
        _run(case, built, text="   ")
    if case.folder != "voxtral_tts":
        with pytest.raises(ValueError, match="ref_sample_rate"):
            _run(case, built, ref_audio=torch.zeros(100))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_cancelled_request_stops_generation(case, built):
    stages = built(case)
    result = _run(case, built, request_id="warm")
    upstream = None
    for name, out in result.trace.items():
        if name == case.engine:
            break
        upstream = out
    if case.folder in ("qwen3_tts", "fun_cosyvoice3", "moss_tts_local", "moss_tts_delay"):
        # the engine's prepared request is process-local: prepare it again for this request id
        stages["preprocessing"].process(StagePayload("cancel-me", {"text": SHORT}), FakeCtx("cancel-me", "preprocessing"))
    ctx = FakeCtx("cancel-me", case.engine, cancelled=True)
    out = stages[case.engine].process(StagePayload("cancel-me", dict(upstream.data)), ctx) if case.streams else None
    if case.streams:
        assert ctx.emitted == [] and out.data["num_frames"] == 0
    else:
        with pytest.raises(RuntimeError, match="no audio frames"):
            stages[case.engine].process(StagePayload("cancel-me", dict(upstream.data)), ctx)
