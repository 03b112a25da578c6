"""``/v1/audio/speech/stream`` on a real ``omni serve`` of the espeak pipeline, through a plain ``websockets`` client."""

from __future__ import annotations

import base64
import json
import socket
import time

import httpx
import pytest

from .conftest import API_KEY, connect, http_pcm, metric, receive, same_speech, send, until

pytestmark = pytest.mark.timeout(300)


def audio_by_segment(messages: list[dict], response_id: str) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for message in messages:
        if message["type"] == "audio.delta" and message["response_id"] == response_id:
            out[message["segment"]] = out.get(message["segment"], b"") + base64.b64decode(message["audio"])
    return out


def speak(ws, text: str, step: int = 3) -> tuple[str, list[dict]]:
    """Send ``text`` a few characters at a time, then input_text.done; every message until response.done."""
    for start in range(0, len(text), step):
        send(ws, "input_text.delta", delta=text[start:start + step])
    send(ws, "input_text.done")
    created = until(ws, "response.created")[-1]
    messages = until(ws, "response.done", response_id=created["response_id"])
    return created["response_id"], messages


def test_three_utterances_on_one_socket_are_segmented_and_equal_the_http_audio(espeak_server):
    texts = [
        "Hello there, my friend. How are you today?",
        "The second answer arrives in pieces; it is spoken as it comes.",
        "Short one.",
    ]
    with connect(espeak_server) as ws:
        send(ws, "session.update", session={"voice": "alloy", "response_format": "pcm"})
        assert receive(ws)["session"]["response_format"] == "pcm"
        for text in texts:
            response_id, messages = speak(ws, text)
            done = messages[-1]
            assert done["status"] == "completed" and done["first_audio_seconds"] is not None
            segments = [m for m in messages if m["type"] == "segment.done"]
            assert [s["segment"] for s in segments] == list(range(len(segments))) == list(range(done["segments"]))
            assert "".join(s["text"] for s in segments) == text  # nothing lost, nothing reordered
            order = [m["segment"] for m in messages if m["type"] == "audio.delta"]
            assert order == sorted(order)
            audio = audio_by_segment(messages, response_id)
            for segment in segments:
                assert same_speech(audio[segment["segment"]], http_pcm(espeak_server, segment["text"].strip(), voice="alloy"))
        assert len([m for m in messages if m["type"] == "segment.done"]) == 1
        send(ws, "session.update", session={"speed": 2.0})  # changes only what it names
        session = receive(ws)["session"]
        assert (session["speed"], session["voice"], session["response_format"], session["model"]) == (2.0, "alloy", "pcm", "omni/espeak")
        send(ws, "session.close")
        assert receive(ws)["type"] == "session.done"


def test_cancel_stops_the_response_everywhere_and_the_next_one_starts(espeak_server):
    long_text = " ".join(f"This is sentence number {n} of a long answer that nobody will hear." for n in range(30))
    cancelled_before = metric(espeak_server, "omni_ws_segments_total", outcome="cancelled")
    with connect(espeak_server) as ws:
        send(ws, "input_text.delta", delta=long_text)
        send(ws, "input_text.done")
        first = until(ws, "audio.delta")[-1]
        send(ws, "response.cancel")
        messages = until(ws, "response.done", response_id=first["response_id"])
        assert messages[-1]["status"] == "cancelled"
        cancelled_at = time.perf_counter()
        send(ws, "input_text.delta", delta="The next answer.")
        send(ws, "input_text.done")
        after = until(ws, "response.done")
        first_new = next(m for m in after if m["type"] == "audio.delta")
        print(f"\nbarge-in: first audio of the next response {1000 * (time.perf_counter() - cancelled_at):.0f} ms after the cancel")
    assert all(m.get("response_id") != first["response_id"] for m in after)  # nothing of the cancelled response after its done
    assert first_new["response_id"] == after[-1]["response_id"] and after[-1]["status"] == "completed"
    done_segments = {m["segment"] for m in messages if m["type"] == "segment.done"}
    assert len(done_segments) < 30  # it stopped: the rest was never synthesised
    assert metric(espeak_server, "omni_ws_segments_total", outcome="cancelled") >= cancelled_before + 1
    depths = httpx.get(f"{espeak_server.url}/metrics", timeout=10).text
    assert 'omni_queue_depth{process="pipeline"} 0.0' in depths and 'omni_queue_depth{process="vocoder"} 0.0' in depths  # both processes freed


def test_a_stalled_reader_pauses_synthesis_and_then_gets_everything_in_order(espeak_server):
    # ~17 MB of base64 audio at 48 kHz: far more than the kernel's socket buffers (4 MB) hold
    sentences = [f"Sentence {n} is long enough to carry a good second of speech audio." for n in range(40)]
    host, port = espeak_server.url.split("//")[1].rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small advertised window
    sock.connect((host, int(port)))
    completed_before = metric(espeak_server, "omni_ws_segments_total", outcome="completed")
    with connect(espeak_server, sock=sock, max_queue=2) as ws:
        send(ws, "session.update", session={"response_format": "pcm", "sample_rate": 48000})
        send(ws, "input_text.delta", delta=" ".join(sentences))
        send(ws, "input_text.done")
        time.sleep(4.0)  # not reading: the server's sends block, so the pipeline must stop
        stalled = metric(espeak_server, "omni_ws_segments_total", outcome="completed") - completed_before
        assert stalled < len(sentences) // 2, f"{stalled} of {len(sentences)} segments were synthesised while the client read nothing"
        assert receive(ws)["session"]["sample_rate"] == 48000
        created = until(ws, "response.created")[-1]
        messages = until(ws, "response.done", response_id=created["response_id"])
    segments = [m for m in messages if m["type"] == "segment.done"]
    assert len(segments) == len(sentences) and messages[-1]["status"] == "completed"
    audio = audio_by_segment(messages, created["response_id"])
    assert all(abs(len(audio[s["segment"]]) / 2 - s["audio_seconds"] * 48000) < 5 for s in segments)  # audio_seconds has 4 decimals
    reference = http_pcm(espeak_server, segments[-1]["text"].strip())  # 24 kHz: compare every other sample
    import numpy as np

    assert same_speech(np.frombuffer(audio[len(sentences) - 1], "<i2")[::2].tobytes(), reference)


def test_hostile_messages_get_errors_and_the_socket_keeps_working(espeak_server):
    with connect(espeak_server) as ws:
        errors = []
        for hostile in (b"\x00\x01binary", "not json {", json.dumps({"type": "input_text.delta", "delta": "x" * 5000}),
                        json.dumps({"type": "input_text.delta", "delta": "y" * 70_000}), json.dumps({"type": "no.such"}),
                        json.dumps({"type": "input_text.delta", "delta": 42}), json.dumps({"type": "response.cancel"}),
                        json.dumps({"type": "session.update", "session": {"speed": 99}})):
            ws.send(hostile)
            message = receive(ws)
            assert message["type"] == "error" and set(message["error"]) == {"message", "type", "param", "code"}
            errors.append(message["error"]["code"])
        assert errors == ["invalid_message_type", "invalid_json", "string_above_max_length", "message_too_large",
                          "unknown_message_type", "invalid_value", "response_not_found", "invalid_value"]
        text = "Ten thousand tiny deltas lose nothing."
        pieces = [""] * 10_000
        for index, char in enumerate(text):
            pieces[index * (10_000 // len(text))] = char
        for piece in pieces:
            send(ws, "input_text.delta", delta=piece)
        send(ws, "input_text.done")
        created = until(ws, "response.created")[-1]
        messages = until(ws, "response.done", response_id=created["response_id"])
    segments = [m for m in messages if m["type"] == "segment.done"]
    assert "".join(s["text"] for s in segments) == text
    audio = audio_by_segment(messages, created["response_id"])
    assert all(same_speech(audio[s["segment"]], http_pcm(espeak_server, s["text"].strip())) for s in segments)


def test_api_key_and_origin_are_checked_like_http(espeak_server):
    from websockets.exceptions import ConnectionClosed

    for key, headers, code in ((None, {}, "invalid_api_key"), ("wrong", {}, "invalid_api_key"),
                               (API_KEY, {"Origin": "https://evil.example"}, "origin_not_allowed")):
        with connect(espeak_server, key=key, **({"origin": headers["Origin"]} if headers else {})) as ws:
            message = receive(ws)
            assert message["type"] == "error" and message["error"]["code"] == code
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd.code == 1008
    # a browser offers the key as a subprotocol (it cannot set Authorization)
    with connect(espeak_server, key=None, subprotocols=["omni.v1", f"omni.api-key.{API_KEY}"]) as ws:
        assert ws.subprotocol == "omni.v1"
        send(ws, "input_text.delta", delta="Allowed.")
        send(ws, "input_text.done")
        assert until(ws, "response.done")[-1]["status"] == "completed"


def test_batch_answers_every_item_and_one_bad_item_fails_alone(espeak_server):
    items = [{"input": "First item."}, {"input": "Second item.", "speed": 99}, {"input": "Third item.", "voice": "nova"}, {"input": ""}]
    response = httpx.post(f"{espeak_server.url}/v1/audio/speech/batch", json={"items": items, "response_format": "pcm"},
                          headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert [d["index"] for d in data] == [0, 1, 2, 3]
    assert data[1]["error"]["param"] == "speed" and data[3]["error"]["code"] == "empty_input"
    assert same_speech(base64.b64decode(data[0]["audio"]), http_pcm(espeak_server, "First item."))
    assert same_speech(base64.b64decode(data[2]["audio"]), http_pcm(espeak_server, "Third item.", voice="nova"))
    assert not same_speech(base64.b64decode(data[0]["audio"]), base64.b64decode(data[2]["audio"]))
    too_many = httpx.post(f"{espeak_server.url}/v1/audio/speech/batch", json={"items": [{"input": "x"}] * 33},
                          headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30)
    assert too_many.status_code == 400 and too_many.json()["error"]["code"] == "too_many_items"
