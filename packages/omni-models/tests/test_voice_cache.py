"""Speaker artefacts keyed by content: computed once, read back from safetensors, bounded in memory."""

from __future__ import annotations

import hashlib

import pytest
import torch

from omni_models.common import voice_cache
from omni_models.common.voice_cache import ArtefactCache, artefact_path, cached_artefacts, reference_speaker
from omni_runtime.errors import InvalidRequest


def key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(voice_cache, "_CACHE", ArtefactCache(1 << 20))


def test_computed_once_then_served_from_memory_and_from_disk(tmp_path):
    calls = []

    def encode(ref):
        calls.append(ref)
        return ref[:4] * 2

    ref = torch.arange(8, dtype=torch.float32)
    data = {"voice_key": key("a"), "voices_dir": str(tmp_path)}
    first = reference_speaker(data, ref, encode, lambda: torch.zeros(4))
    assert torch.equal(first, ref[:4] * 2) and len(calls) == 1
    assert artefact_path(str(tmp_path), key("a")).is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]  # written by rename, no temp left
    assert torch.equal(reference_speaker(data, ref, encode, lambda: torch.zeros(4)), first) and len(calls) == 1
    voice_cache._CACHE = ArtefactCache(1 << 20)  # a restarted worker: only the file is left
    assert torch.equal(reference_speaker(data, None, encode, lambda: torch.zeros(4)), first) and len(calls) == 1


def test_without_a_key_the_encoder_or_the_preset_runs_as_before(tmp_path):
    ref = torch.ones(8)
    assert torch.equal(reference_speaker({}, ref, lambda r: r * 3, lambda: torch.zeros(1)), ref * 3)
    assert torch.equal(reference_speaker({}, None, lambda r: r * 3, lambda: torch.zeros(1)), torch.zeros(1))


def test_missing_artefacts_without_audio_are_a_user_error_and_bad_keys_are_refused(tmp_path):
    with pytest.raises(InvalidRequest, match="upload the voice again"):
        cached_artefacts({"voice_key": key("gone"), "voices_dir": str(tmp_path)}, None)
    with pytest.raises(ValueError, match="sha256"):
        cached_artefacts({"voice_key": "../../etc/passwd", "voices_dir": str(tmp_path)}, lambda: {})


def test_the_memory_cache_is_bounded_in_bytes_and_least_recently_used():
    cache = ArtefactCache(max_bytes=3 * 64)  # three 16-float tensors
    for name in "abcd":
        cache.put(name, {"speaker": torch.zeros(16)})
        if name == "b":
            assert cache.get("a") is not None  # a is now more recent than b
    assert cache.size_bytes <= 3 * 64
    assert cache.get("b") is None and all(cache.get(n) is not None for n in "acd")
    cache.put("huge", {"speaker": torch.zeros(1000)})
    assert cache.get("huge") is None and cache.size_bytes <= 3 * 64
