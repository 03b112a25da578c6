"""Uploaded voices beyond Qwen3-TTS, on a real ``omni serve``: Higgs-TTS (seeded dummy weights), whose artefacts are the
reference's codec codes, computed by its ``audio_encoder`` stage in the ``tts_frontend`` process, a process apart from
the engine; the Qwen3-TTS 12 Hz Base checkpoint layout (x-vector); espeak and Voxtral, which do not clone and say so."""

from __future__ import annotations

import base64
import importlib.util
import sys

import httpx
import openai
import pytest

from .conftest import API_KEY, MODELS, assert_clean_exit, metric, shm_segments, start_server, wait_healthy
from .test_voices import computed, recording, upload

pytestmark = pytest.mark.timeout(600)
HIGGS = MODELS / "higgs_tts" / "pipeline.yaml"
MODEL = "bosonai/higgs-tts-3-4b"


def speak(client: openai.OpenAI, voice: str | None = None, **extra) -> bytes:
    response = client.audio.speech.create(model=MODEL, input="Reference codes are keyed by content.", voice=voice or "default",
                                          response_format="pcm", extra_body={"seed": 7, **extra})
    return response.content


def test_higgs_reference_codes_are_computed_once_by_its_audio_encoder_stage(tmp_path):
    a_flac, a_wav, b_flac = recording(180.0, "FLAC"), recording(180.0, "WAV"), recording(310.0, "FLAC")
    before = shm_segments()
    server = start_server("--voices-dir", str(tmp_path / "voices"), "--max-body-bytes", "1000000", config=HIGGS)
    try:
        wait_healthy(server.url, timeout=120)
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120)
        alice = upload(server.url, "alice", a_flac)
        assert alice.status_code == 201, alice.text
        bob = upload(server.url, "bob", a_wav)  # the same PCM in another container, under another name
        assert bob.status_code == 201 and bob.json()["sha256"] == alice.json()["sha256"]
        assert computed(server) == 1 and metric(server, "omni_voice_artefacts_total", outcome="reused") == 1

        as_alice = speak(client, "alice")
        assert as_alice == speak(client, "bob") and as_alice != speak(client)
        assert speak(client, ref_audio=base64.b64encode(a_wav).decode()) == as_alice  # inline ref_audio shares the cache
        assert computed(server) == 1

        assert client.audio.voices.delete(alice.json()["id"]).deleted is True
        assert upload(server.url, "alice", b_flac).status_code == 201  # the name again, for other audio
        assert computed(server) == 2
        new_alice = speak(client, "alice")
        assert new_alice != as_alice and new_alice == speak(client, ref_audio=base64.b64encode(b_flac).decode())
        assert speak(client, "bob") == as_alice  # bob's recording is still the first one
        assert computed(server) == 2
    finally:
        assert_clean_exit(server, before)


def test_a_model_that_does_not_clone_refuses_uploads(espeak_server):
    response = httpx.post(f"{espeak_server.url}/v1/audio/voices", headers={"Authorization": f"Bearer {API_KEY}"},
                          files={"file": ("ref.flac", recording(180.0, "FLAC"))}, data={"name": "alice"}, timeout=120)
    assert response.status_code == 400 and response.json()["error"]["code"] == "voice_cloning_unsupported"
    listed = httpx.get(f"{espeak_server.url}/v1/audio/voices", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30).json()["data"]
    assert all(v["type"] == "builtin" for v in listed)


def test_voxtral_which_takes_no_reference_refuses_uploads(tmp_path):
    before = shm_segments()
    server = start_server("--voices-dir", str(tmp_path / "voices"), config=MODELS / "voxtral_tts" / "pipeline.yaml")
    try:
        wait_healthy(server.url, timeout=120)
        response = upload(server.url, "alice", recording(180.0, "FLAC"))
        assert response.status_code == 400 and response.json()["error"]["code"] == "voice_cloning_unsupported"
        assert "does not clone voices" in response.json()["error"]["message"]
    finally:
        assert_clean_exit(server, before)


def test_qwen3_12hz_base_checkpoint_stores_the_x_vector_of_an_upload(tmp_path):
    """The published Qwen3-TTS 12 Hz Base layout (a tiny checkpoint, ``--weights``): the x-vector comes from its speaker
    encoder once for both names and for inline ref_audio; without transformers (in-context cloning) the voice speaks
    with ``x_vector_only_mode`` and a request that wants ICL is told how to get it."""
    sys.path.insert(0, str(MODELS.parents[1] / "tests"))
    from qwen3_tts_12hz_checkpoint import write_checkpoint

    weights = write_checkpoint(tmp_path / "base", "base")
    before = shm_segments()
    server = start_server("--weights", str(weights), "--voices-dir", str(tmp_path / "voices"), "--max-body-bytes", "1000000",
                          config=MODELS / "qwen3_tts_12hz" / "pipeline.yaml")
    try:
        wait_healthy(server.url, timeout=120)
        a_flac, a_wav = recording(180.0, "FLAC"), recording(180.0, "WAV")
        assert upload(server.url, "alice", a_flac).status_code == 201 and upload(server.url, "bob", a_wav).status_code == 201
        assert computed(server) == 1

        def say(**fields) -> httpx.Response:
            body = {"input": "hello there", "response_format": "pcm", "seed": 7, "max_new_tokens": 8, "x_vector_only_mode": True, **fields}
            return httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=120)

        as_alice = say(voice="alice")
        assert as_alice.status_code == 200, as_alice.text
        assert say(voice="bob").content == as_alice.content == say(ref_audio=base64.b64encode(a_wav).decode()).content
        assert say(ref_audio=base64.b64encode(recording(310.0, "WAV")).decode()).content != as_alice.content
        assert computed(server) == 2
        if importlib.util.find_spec("transformers") is None:
            icl = say(voice="alice", x_vector_only_mode=False)
            assert icl.status_code == 400 and "x_vector_only_mode" in icl.json()["error"]["message"]
    finally:
        assert_clean_exit(server, before)
