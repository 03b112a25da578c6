"""Word timestamps through the real server: ``timestamps: "word"`` with the espeak pipeline's aligner stage on.

The aligner runs in a process of its own (``--stages.aligner.process aligner``), so the word
events travel from the engine through the vocoder's process and across a process boundary."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .conftest import ESPEAK, Server, assert_clean_exit, connect, receive, send, shm_segments, start_server, until, wait_healthy

TEXT = "Hello there, my friend. How are you today? The weather is lovely."
RATE = 24000


@pytest.fixture(scope="module")
def aligned_server() -> Iterator[Server]:
    before = shm_segments()
    server = start_server("--stages.aligner.enabled", "true", "--stages.aligner.process", "aligner", config=ESPEAK)
    try:
        wait_healthy(server.url)
        yield server
    finally:
        assert_clean_exit(server, before)


def _spoken(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def _assert_real_times(words: list[dict[str, Any]], text: str, audio_seconds: float) -> None:
    assert [w["word"].lower() for w in words] == _spoken(text)
    previous_end = 0.0
    for word in words:
        assert previous_end <= word["start"] < word["end"] <= audio_seconds + 1e-3, (word, audio_seconds)
        previous_end = word["end"]
    assert audio_seconds - words[-1]["end"] < 0.5  # the times span the speech (espeak ends on a 0.3 s pause), not a prefix of it


def _sse(server: Server, text: str, **fields: Any) -> tuple[list[dict[str, Any]], bytes]:
    events, audio = [], b""
    body = {"input": text, "stream_format": "sse", "response_format": "pcm", "timestamps": "word", **fields}
    with httpx.stream("POST", f"{server.url}/v1/audio/speech", json=body, timeout=60) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                events.append(event)
                if event["type"] == "speech.audio.delta":
                    audio += base64.b64decode(event["audio"])
    return events, audio


def test_sse_sends_each_sentence_words_after_its_audio_with_real_times(aligned_server):
    events, audio = _sse(aligned_server, TEXT)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "speech.audio.delta" and kinds[-1] == "speech.audio.done"
    word_events = [i for i, kind in enumerate(kinds) if kind == "speech.audio.words"]
    assert len(word_events) == 3  # one per sentence, streamed: the first comes before the last audio
    assert word_events[0] < max(i for i, kind in enumerate(kinds) if kind == "speech.audio.delta")
    words = [w for i in word_events for w in events[i]["words"]]
    _assert_real_times(words, TEXT, len(audio) / 2 / RATE)


def test_the_batch_endpoint_answers_the_same_words_in_its_json(aligned_server):
    events, _ = _sse(aligned_server, TEXT)
    streamed = [w for e in events if e["type"] == "speech.audio.words" for w in e["words"]]
    response = httpx.post(f"{aligned_server.url}/v1/audio/speech/batch", timeout=60, json={
        "timestamps": "word", "response_format": "pcm",
        "items": [{"input": TEXT}, {"input": "Short one."}, {"input": "No times here.", "timestamps": None}],
    })
    assert response.status_code == 200, response.text
    first, second, third = response.json()["data"]
    assert first["words"] == streamed  # exact engine times: the same bytes of JSON alone or in a batch
    _assert_real_times(second["words"], "Short one.", second["audio_seconds"])
    assert "words" not in third


def test_the_websocket_stream_sends_audio_words_counted_from_the_start_of_the_response(aligned_server):
    with connect(aligned_server, key=None) as ws:
        send(ws, "session.update", session={"response_format": "pcm", "timestamps": "word"})
        assert receive(ws)["type"] == "session.updated"
        send(ws, "input_text.delta", delta=TEXT)
        send(ws, "input_text.done")
        messages = until(ws, "response.done")
    audio = sum(len(base64.b64decode(m["audio"])) for m in messages if m["type"] == "audio.delta")
    segments = {m["segment"] for m in messages if m["type"] == "audio.words"}
    assert len(segments) >= 2  # the answer was spoken as several segments; times still run on
    words = [w for m in messages if m["type"] == "audio.words" for w in m["words"]]
    _assert_real_times(words, TEXT, audio / 2 / RATE)


def test_timestamps_where_they_cannot_go_are_a_400_naming_the_field(aligned_server):
    response = httpx.post(f"{aligned_server.url}/v1/audio/speech", json={"input": TEXT, "timestamps": "word"}, timeout=30)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "timestamps" and error["code"] == "timestamps_unavailable" and "sse" in error["message"]
    response = httpx.post(f"{aligned_server.url}/v1/audio/speech", json={"input": TEXT, "timestamps": "phoneme", "stream_format": "sse"}, timeout=30)
    assert response.status_code == 400 and response.json()["error"]["code"] == "unsupported_timestamps"


def test_a_server_without_the_aligner_refuses_timestamps_and_says_how_to_switch_it_on():
    before = shm_segments()
    server = start_server(config=ESPEAK)
    try:
        wait_healthy(server.url)
        response = httpx.post(f"{server.url}/v1/audio/speech", json={"input": TEXT, "timestamps": "word", "stream_format": "sse"}, timeout=30)
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "timestamps_unavailable" and "--stages.aligner.enabled true" in error["message"]
        plain = httpx.post(f"{server.url}/v1/audio/speech", json={"input": "Still speaks.", "response_format": "pcm"}, timeout=30)
        assert plain.status_code == 200 and len(plain.content) > 0
    finally:
        assert_clean_exit(server, before)
