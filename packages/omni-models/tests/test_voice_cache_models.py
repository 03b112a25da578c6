"""Every model that clones a voice reads and fills the voice cache through its own encoder stage.

Driven in-process along the pipeline file (``helpers.synthesize``), as the server drives it: a
request keyed by the server (``voice_key`` + ``voices_dir``) carries the recording only while its
artefacts do not exist. The shared factories' speaker encoder (Audar-TTS, Zonos2), audio encoder
(Higgs-TTS), the engine that encodes the reference itself (FishAudio S2-Pro), the MOSS queued
preprocessing, and the own stages of Qwen3-TTS, Ming-Omni-TTS and Fun-CosyVoice3 are all covered.
"""

from __future__ import annotations

import hashlib
import math

import pytest
import torch
from helpers import build_stages, synthesize
from models_table import CASES

from omni_models.common import voice_cache
from omni_models.common.voice_cache import ArtefactCache, artefact_path
from omni_runtime.errors import InvalidRequest

CLONING = [c for c in CASES if c.variant == "pipeline" and c.folder != "voxtral_tts"]
TEXT = "Voices are keyed by content."


def key(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def tone(freq: float) -> torch.Tensor:
    t = torch.arange(24000) / 24000
    return (0.3 * torch.sin(2 * math.pi * freq * t) * (0.6 + 0.4 * torch.sin(2 * math.pi * 3 * t))).to(torch.float32)


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(voice_cache, "_CACHE", ArtefactCache(1 << 24))


@pytest.mark.parametrize("case", CLONING, ids=lambda c: c.model_id)
def test_a_keyed_voice_is_encoded_once_then_served_from_memory_and_disk(case, tmp_path):
    stages = build_stages(case.folder, case.variant)

    def speak(**fields) -> torch.Tensor:
        return synthesize(case.folder, {"text": TEXT, "seed": 7, **fields}, variant=case.variant, stages=stages).audio

    a, b = tone(180.0), tone(310.0)
    voice_a = {"voice_key": key("a"), "voices_dir": str(tmp_path)}
    unkeyed = speak(ref_audio=a, ref_sample_rate=24000)
    first = speak(ref_audio=a, ref_sample_rate=24000, **voice_a)
    assert torch.equal(first, unkeyed), "the cached artefacts are what the encoder computes"
    assert artefact_path(str(tmp_path), key("a")).is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]

    assert torch.equal(speak(**voice_a), first), "an uploaded voice needs no audio once computed"
    # the key decides, not the audio: with the artefacts cached, the encoder does not run again
    assert torch.equal(speak(ref_audio=b, ref_sample_rate=24000, **voice_a), first)
    voice_cache._CACHE = ArtefactCache(1 << 24)  # a restarted stage process: only the file is left
    assert torch.equal(speak(**voice_a), first)

    voice_b = {"voice_key": key("b"), "voices_dir": str(tmp_path)}
    other = speak(ref_audio=b, ref_sample_rate=24000, **voice_b)
    assert not torch.equal(other[..., :1000], first[..., :1000]), "another recording is another speaker"
    assert torch.equal(speak(**voice_b), other)
    assert not torch.equal(speak()[..., :1000], first[..., :1000]), "a preset voice is not served from the cache"

    artefact_path(str(tmp_path), key("a")).unlink()
    voice_cache._CACHE = ArtefactCache(1 << 24)
    with pytest.raises(InvalidRequest, match="upload the voice again"):
        speak(**voice_a)  # deleted: never a stale or a preset speaker


def test_the_stage_holds_artefacts_in_the_byte_bounded_cache(tmp_path):
    """Zonos2's speaker encoder: the embeddings of recent voices stay in memory up to the byte bound."""
    case = next(c for c in CASES if c.folder == "zonos2")
    stages = build_stages(case.folder, case.variant)
    embedding_bytes = 64 * 4
    voice_cache._CACHE = cache = ArtefactCache(2 * embedding_bytes)
    for name, freq in (("a", 180.0), ("b", 240.0), ("c", 310.0)):
        synthesize(case.folder, {"text": "Hi.", "ref_audio": tone(freq), "ref_sample_rate": 24000, "voice_key": key(name),
                                 "voices_dir": str(tmp_path)}, stages=stages)
    assert cache.size_bytes == 2 * embedding_bytes
    assert cache.get(key("a")) is None and cache.get(key("b")) is not None and cache.get(key("c")) is not None
    assert artefact_path(str(tmp_path), key("a")).is_file()  # evicted from memory, still on disk


def test_real_higgs_audio_encoder_stage_encodes_a_keyed_voice_once(tmp_path):
    """The published Higgs-TTS layout (a tiny checkpoint): its ``audio_encoder`` stage computes the reference
    codes once; the preprocessing passes the server's key on; a preset voice has no codes."""
    from higgs_checkpoint import write_checkpoint

    from omni_models.higgs_tts_real import stages
    from omni_runtime import StagePayload

    root = str(write_checkpoint(tmp_path / "ckpt", reference=False).root)
    pre, encoder = stages.build_preprocessing(model_path=root), stages.build_audio_encoder(model_path=root)

    def codes(**fields):
        payload = pre.process(StagePayload("r", {"text": "hello there", "ref_text": "a reference", **fields}))
        return encoder.process(payload).data["ref_codes"]

    voice = {"voice_key": key("higgs"), "voices_dir": str(tmp_path / "voices")}
    unkeyed = codes(ref_audio=tone(180.0), ref_sample_rate=24000)
    assert torch.equal(codes(ref_audio=tone(180.0), ref_sample_rate=24000, **voice), unkeyed)
    assert artefact_path(voice["voices_dir"], voice["voice_key"]).is_file()
    assert torch.equal(codes(**voice), unkeyed) and torch.equal(codes(ref_audio=tone(310.0), ref_sample_rate=24000, **voice), unkeyed)
    voice_cache._CACHE = ArtefactCache(1 << 24)
    assert torch.equal(codes(**voice), unkeyed)
    assert codes() is None


def test_real_qwen3_base_x_vector_is_computed_once_for_a_keyed_voice(tmp_path):
    """The published Qwen3-TTS 12 Hz Base layout (a tiny checkpoint): the speaker encoder's x-vector of an uploaded or
    inline voice is computed once; an uploaded voice (a key, no audio) passes the Base checkpoint's ref_audio rule."""
    from qwen3_tts_12hz_checkpoint import write_checkpoint

    from omni_models.qwen3_tts_12hz import stages

    pre = stages.build_preprocessing(model_path=str(write_checkpoint(tmp_path / "base", "base")))
    voice = {"voice_key": key("qwen3"), "voices_dir": str(tmp_path / "voices")}

    def x_vector(**fields):
        return pre.prepare({"text": "hello there", "x_vector_only_mode": True, "max_new_tokens": 8, **fields}).inputs.x_vector

    unkeyed = x_vector(ref_audio=tone(180.0), ref_sample_rate=24000)
    assert torch.equal(x_vector(ref_audio=tone(180.0), ref_sample_rate=24000, **voice), unkeyed)
    assert artefact_path(voice["voices_dir"], voice["voice_key"]).is_file()
    assert torch.equal(x_vector(**voice), unkeyed) and torch.equal(x_vector(ref_audio=tone(310.0), ref_sample_rate=24000, **voice), unkeyed)
    voice_cache._CACHE = ArtefactCache(1 << 24)
    assert torch.equal(x_vector(**voice), unkeyed)
    assert not torch.equal(x_vector(ref_audio=tone(310.0), ref_sample_rate=24000), unkeyed)
    with pytest.raises(InvalidRequest, match="ref_audio"):
        x_vector()
