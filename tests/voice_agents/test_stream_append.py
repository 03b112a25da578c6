"""True append on ``/v1/audio/speech/stream``: a real ``omni serve`` of a tiny Qwen3-TTS 12 Hz checkpoint (the published
layout, random weights) takes an utterance's words into ONE running request while it already speaks."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pytest

from .conftest import API_KEY, MODELS, Server, assert_clean_exit, connect, metric, receive, send, shm_segments, start_server, until, wait_healthy

pytestmark = pytest.mark.timeout(300)

TEXT = ("Hello there", " my friend,", " how are", " you today?", " I hope well.")
SESSION = {"voice": "vivian", "response_format": "pcm", "seed": 5, "max_new_tokens": 150}
"""Seed 5: this random checkpoint speaks the whole text before it samples its end of speech."""


@pytest.fixture(scope="module")
def qwen3_server(tmp_path_factory) -> Iterator[Server]:
    sys.path.insert(0, str(MODELS.parents[1] / "tests"))
    from qwen3_tts_12hz_checkpoint import write_checkpoint

    weights = write_checkpoint(tmp_path_factory.mktemp("qwen3_append") / "cv", "custom_voice")
    before = shm_segments()
    # a short body deadline: a WebSocket session must outlive it (the upgrade is not a body being sent)
    server = start_server("--weights", str(weights), "--body-timeout", "1", config=MODELS / "qwen3_tts_12hz" / "pipeline.yaml")
    try:
        wait_healthy(server.url, timeout=120)
        yield server
    finally:
        assert_clean_exit(server, before)


def _update(ws, **session) -> dict:
    send(ws, "session.update", session={**SESSION, **session})
    return until(ws, "session.updated")[-1]["session"]


def test_deltas_of_an_utterance_become_one_request_that_speaks_before_the_last_delta(qwen3_server):
    completed = metric(qwen3_server, "omni_ws_segments_total", outcome="completed")
    appends = metric(qwen3_server, "omni_ws_appends_total")
    with connect(qwen3_server, key=None) as ws:
        assert _update(ws)["text_append"] is True
        for delta in TEXT[:3]:
            send(ws, "input_text.delta", delta=delta)
        before_last = until(ws, "audio.delta")  # audio while the utterance's text is still arriving
        for delta in TEXT[3:]:
            send(ws, "input_text.delta", delta=delta)
        send(ws, "input_text.done")
        rest = until(ws, "response.done")
    messages = before_last + rest
    done = messages[-1]
    assert done["status"] == "completed" and done["segments"] == 1 and done["failed_segments"] == 0
    assert {m["segment"] for m in messages if m["type"] == "audio.delta"} == {0}
    [segment] = [m for m in messages if m["type"] == "segment.done"]
    assert segment["text"] == "".join(TEXT) and segment["audio_seconds"] > 0
    assert metric(qwen3_server, "omni_ws_segments_total", outcome="completed") == completed + 1  # one request
    assert metric(qwen3_server, "omni_ws_appends_total") >= appends + 2  # the words after the first went to it


def test_cancel_while_the_request_waits_for_text_frees_it_and_the_next_utterance_runs(qwen3_server):
    with connect(qwen3_server, key=None) as ws:
        _update(ws)
        send(ws, "input_text.delta", delta="Hello there my friend, how")
        created = until(ws, "audio.delta")[0]
        assert created["type"] == "response.created"
        time.sleep(0.5)  # the request has spoken its words and waits in its engine slot for more
        send(ws, "response.cancel")
        cancelled = until(ws, "response.done")[-1]
        assert cancelled["status"] == "cancelled" and cancelled["response_id"] == created["response_id"]
        deadline = time.monotonic() + 10
        while metric(qwen3_server, "omni_queue_depth") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert metric(qwen3_server, "omni_queue_depth") == 0  # gone from every process
        for delta in TEXT:
            send(ws, "input_text.delta", delta=delta)
        send(ws, "input_text.done")
        done = until(ws, "response.done")[-1]
        assert done["status"] == "completed" and done["segments"] == 1


def test_a_client_may_opt_out_and_get_separate_segments(qwen3_server):
    with connect(qwen3_server, key=None) as ws:
        assert _update(ws, text_append=False)["text_append"] is False
        for delta in TEXT:
            send(ws, "input_text.delta", delta=delta)
        send(ws, "input_text.done")
        done = until(ws, "response.done")[-1]
        send(ws, "session.update", session={"text_append": "yes"})
        refused = receive(ws)
    assert done["status"] == "completed" and done["segments"] >= 2
    assert refused["type"] == "error" and refused["error"]["param"] == "text_append"


def test_a_model_that_cannot_append_says_so(espeak_server):
    with connect(espeak_server, key=API_KEY) as ws:
        send(ws, "session.update", session={"response_format": "pcm"})
        assert until(ws, "session.updated")[-1]["session"]["text_append"] is False
        send(ws, "session.update", session={"text_append": True})
        refused = receive(ws)
    assert refused["error"]["code"] == "text_append_unsupported"


def test_words_after_the_model_ended_its_request_start_the_next_segment(qwen3_server):
    """Seed 7: this checkpoint samples its end of speech after 11 frames, before the text ran out; what the client
    sends after that is not lost but spoken by the utterance's next segment."""
    with connect(qwen3_server, key=None) as ws:
        _update(ws, seed=7)
        send(ws, "input_text.delta", delta="Hello there my friend, how are")
        first = until(ws, "segment.done")[-1]
        send(ws, "input_text.delta", delta=" you today?")
        send(ws, "input_text.done")
        rest = until(ws, "response.done")
    assert first["segment"] == 0
    [second] = [m for m in rest if m["type"] == "segment.done"]
    assert second["segment"] == 1 and second["text"].endswith("you today?")
    assert rest[-1]["status"] == "completed" and rest[-1]["segments"] == 2


def test_a_session_outlives_the_http_body_deadline(qwen3_server):
    """The server runs with --body-timeout 1: a socket open for longer still speaks (the HTTP guard hands the
    connection over at the upgrade instead of closing it as a body that never came)."""
    with connect(qwen3_server, key=None) as ws:
        _update(ws)
        time.sleep(2.5)
        for delta in TEXT:
            send(ws, "input_text.delta", delta=delta)
        send(ws, "input_text.done")
        assert until(ws, "response.done")[-1]["status"] == "completed"
