"""Uploaded voices on a real ``omni serve`` of Qwen3-TTS (seeded dummy weights): computed once by the model's own
encoder stage, keyed by content, persisted in ``--voices-dir``, reached through the ``openai`` client and raw HTTP."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
import soundfile

from .conftest import QWEN3, assert_clean_exit, connect, metric, receive, send, shm_segments, start_server, until, wait_healthy

pytestmark = pytest.mark.timeout(600)
MODEL = "qwen/qwen3-tts"


def recording(freq: float, fmt: str) -> bytes:
    """Two seconds of a voiced-like signal in any container PyAV reads."""
    rate = 16000
    t = np.arange(2 * rate) / rate
    wave = 0.3 * np.sin(2 * np.pi * freq * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    out = io.BytesIO()
    soundfile.write(out, np.rint(wave * 32767).astype(np.int16), rate, format=fmt, subtype="PCM_16")  # the same PCM in every container
    return out.getvalue()


def upload(url: str, name: str, audio: bytes, filename: str = "ref.flac") -> httpx.Response:
    return httpx.post(f"{url}/v1/audio/voices", files={"file": (filename, audio)}, data={"name": name, "ref_text": "A reference."}, timeout=120)


def speak(client: openai.OpenAI, voice: str | None = None, **extra) -> bytes:
    response = client.audio.speech.create(model=MODEL, input="Cloned voices are keyed by content.", voice=voice or "default",
                                          response_format="pcm", extra_body={"seed": 7, **extra})
    return response.content


def computed(url) -> float:
    return metric(url, "omni_voice_artefacts_total", outcome="computed")


@pytest.fixture
def voices_dir(tmp_path) -> Path:
    return tmp_path / "voices"


def serve(voices_dir: Path):
    server = start_server("--voices-dir", str(voices_dir), "--max-body-bytes", "1000000", config=QWEN3)  # inline ref_audio needs room
    wait_healthy(server.url, timeout=120)
    return server


def test_voices_are_computed_once_keyed_by_content_and_survive_a_restart(voices_dir):
    a_flac, a_wav, b_flac = recording(180.0, "FLAC"), recording(180.0, "WAV"), recording(310.0, "FLAC")
    before = shm_segments()
    server = serve(voices_dir)
    try:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120)
        alice = upload(server.url, "alice", a_flac)
        assert alice.status_code == 201, alice.text
        assert computed(server) == 1
        # the same PCM in another container, under another name, through the openai client's own method
        bob = client.audio.voices.create(audio_sample=("ref.wav", a_wav), consent="not-checked-by-omni", name="bob")
        assert bob.object == "audio.voice" and bob.type == "audio_sample" and bob.model_extra["sha256"] == alice.json()["sha256"]
        assert computed(server) == 1 and metric(server, "omni_voice_artefacts_total", outcome="reused") == 1
        assert upload(server.url, "bob", b_flac).status_code == 409
        assert upload(server.url, "Alloy", b_flac).json()["error"]["code"] == "voice_exists"  # a preset's name is taken
        listed = httpx.get(f"{server.url}/v1/audio/voices").json()["data"]
        assert {"alice", "bob", "alloy"} <= {v["name"] for v in listed}
        assert {v["type"] for v in listed} == {"builtin", "audio_sample"}

        as_alice, as_bob = speak(client, "alice"), speak(client, "bob")
        assert as_alice == as_bob and as_alice != speak(client)  # the cloned speaker, not the default one
        inline = speak(client, ref_audio=base64.b64encode(a_wav).decode())  # inline ref_audio shares the cache
        assert inline == as_alice and computed(server) == 1

        alice_id = alice.json()["id"]
        assert client.audio.voices.delete(alice_id).deleted is True
        assert httpx.get(f"{server.url}/v1/audio/voices/{alice_id}").status_code == 404
        again = upload(server.url, "alice", b_flac)  # the name again, for other audio
        assert again.status_code == 201
        httpx_card = again.json()
        assert computed(server) == 2
        new_alice = speak(client, "alice")
        assert new_alice != as_alice  # never the old speaker
        assert new_alice == speak(client, ref_audio=base64.b64encode(b_flac).decode())

        # a batch: submitted together, batched by the engine; per-request seeds keep every item equal to its single request
        items = [{"input": "Cloned voices are keyed by content.", "voice": "bob"}, {"input": "Cloned voices are keyed by content."},
                 {"input": "Unknown voice.", "voice": "nobody"}]
        batch = httpx.post(f"{server.url}/v1/audio/speech/batch", json={"items": items, "response_format": "pcm", "seed": 7}, timeout=300)
        data = batch.json()["data"]
        assert base64.b64decode(data[0]["audio"]) == as_bob and base64.b64decode(data[1]["audio"]) == speak(client)
        assert data[2]["error"]["param"] == "voice"

        with connect(server, key=None) as ws:  # the WebSocket resolves uploaded voices the same way
            send(ws, "session.update", session={"voice": "bob", "response_format": "pcm"})
            assert receive(ws)["session"]["voice"] == "bob"
            send(ws, "input_text.delta", delta="Streaming with an uploaded voice.")
            send(ws, "input_text.done")
            assert until(ws, "response.done", timeout=120)[-1]["status"] == "completed"
        bad = upload(server.url, "noise", b"definitely not audio")
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_audio"
    finally:
        assert_clean_exit(server, before)

    keys = {alice.json()["sha256"], httpx_card["sha256"]}
    assert sorted(p.name for p in voices_dir.iterdir()) == sorted(["voices.json", *(f"{k}.safetensors" for k in keys)])  # no temp files left
    restarted = serve(voices_dir)
    try:
        client = openai.OpenAI(base_url=f"{restarted.url}/v1", api_key="unused", max_retries=0, timeout=120)
        assert {v["name"] for v in httpx.get(f"{restarted.url}/v1/audio/voices?model={MODEL}").json()["data"] if v["type"] == "audio_sample"} == {"alice", "bob"}
        assert speak(client, "bob") == as_bob and speak(client, "alice") == new_alice
        assert computed(restarted) == 0  # read back from --voices-dir, nothing recomputed
    finally:
        assert_clean_exit(restarted, before)
