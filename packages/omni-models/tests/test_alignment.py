"""Word times: libespeak-ng's own word events, and PocketSphinx forced alignment measured against them."""

from __future__ import annotations

import re

import numpy as np
import pytest

from omni_models.espeak.engine import get_engine

TEXT = "The quick brown fox jumps over the lazy dog. Please call me tomorrow morning, my friend."


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def test_espeak_word_events_give_every_word_in_order_inside_the_audio():
    speech = get_engine().synthesize(TEXT)
    spoken = [TEXT[m.char_start : m.char_start + m.char_length] for m in speech.words]
    assert [w.lower() for w in spoken] == _words(TEXT)
    total = speech.pcm.shape[0]
    previous_end = 0
    for mark in speech.words:
        assert 0 <= mark.start < mark.end <= total
        assert mark.start >= previous_end  # monotonic, no overlap
        previous_end = mark.end
    # the sentence pause lies between "dog" and "Please": a gap of silence, not a word
    dog, please = speech.words[8], speech.words[9]
    assert (please.start - dog.end) / speech.sample_rate > 0.1


def test_the_same_text_gives_the_same_word_times():
    engine = get_engine()
    assert engine.synthesize(TEXT).words == engine.synthesize(TEXT).words


def test_forced_alignment_with_the_packaged_model_agrees_with_the_engine_events():
    pytest.importorskip("pocketsphinx")
    from omni_models.alignment.sphinx import SphinxAligner

    speech = get_engine().synthesize(TEXT)
    audio = speech.pcm.numpy().astype(np.float32) / 32768
    aligned = SphinxAligner(None).align(audio, speech.sample_rate, TEXT)
    assert [w.word for w in aligned] == _words(TEXT)
    starts = np.array([w.start for w in aligned])
    exact = np.array([m.start / speech.sample_rate for m in speech.words])
    assert np.all(np.diff(starts) >= 0)
    assert float(np.mean(np.abs(starts - exact))) < 0.05  # measured: about 10 ms
    assert aligned == SphinxAligner(None).align(audio, speech.sample_rate, TEXT)  # deterministic


def test_a_model_directory_without_a_pocketsphinx_model_is_refused_naming_the_knob(tmp_path):
    pytest.importorskip("pocketsphinx")
    from omni_models.alignment import build_aligner
    from omni_runtime import StageConfigError

    with pytest.raises(StageConfigError) as info:
        build_aligner(method="forced", model_dir=str(tmp_path))
    assert info.value.knob == "model_dir"
