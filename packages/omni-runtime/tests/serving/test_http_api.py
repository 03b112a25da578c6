"""``omni serve`` through the official OpenAI client, against real stage processes."""

from __future__ import annotations

import io
import json
import re
import socket
import struct
import time
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
import soundfile
from prometheus_client.parser import text_string_to_metric_families

from .conftest import MODEL_ID, SAMPLE_RATE
from .stages import plan, tone

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)


def expected_pcm(text: str, voice: str | None = None, speed: float = 1.0) -> np.ndarray:
    """The int16 samples the test vocoder must deliver for this request."""
    freq, total = plan(text, voice, speed, SAMPLE_RATE)
    return np.rint(np.clip(tone(freq, 0, total, SAMPLE_RATE).numpy(), -1, 1) * 32767).astype(np.int16)


def decode_with_ffmpeg(data: bytes) -> np.ndarray:
    """Mono int16 samples of any container, decoded by ffmpeg through PyAV (from a stream, as a player reads it)."""
    import av

    with av.open(io.BytesIO(data)) as container:
        frames = [frame.to_ndarray().reshape(-1) for frame in container.decode(audio=0)]
    return np.concatenate(frames) if frames else np.zeros(0, np.int16)


def parse_wav(data: bytes) -> tuple[dict[str, int], bytes]:
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE" and data[12:16] == b"fmt "
    fmt_size, tag, channels, rate, byte_rate, align, bits = struct.unpack("<IHHIIHH", data[16:36])
    assert (fmt_size, tag, bits) == (16, 1, 16)
    assert data[36:40] == b"data"
    (size,) = struct.unpack("<I", data[40:44])
    riff_size = struct.unpack("<I", data[4:8])[0]
    header = {"channels": channels, "rate": rate, "byte_rate": byte_rate, "align": align, "size": size, "riff_size": riff_size}
    return header, data[44:]


def test_speech_wav_is_the_pipelines_audio(client):
    text = "Hello from a real pipeline."
    response = client.audio.speech.create(model=MODEL_ID, input=text, voice="alloy", response_format="wav")
    header, data = parse_wav(response.content)
    assert header["rate"] == SAMPLE_RATE and header["channels"] == 1
    assert header["size"] == len(data) and header["riff_size"] == 36 + len(data)
    assert response.response.headers["content-type"] == "audio/wav"
    np.testing.assert_array_equal(np.frombuffer(data, "<i2"), expected_pcm(text, "alloy"))


def test_pcm_voice_and_speed_reach_the_stages(client):
    text = "Faster and lower."
    response = client.audio.speech.create(model=MODEL_ID, input=text, voice="low", response_format="pcm", speed=2.0)
    assert response.response.headers["x-audio-sample-rate"] == str(SAMPLE_RATE)
    np.testing.assert_array_equal(np.frombuffer(response.content, "<i2"), expected_pcm(text, "low", 2.0))


def test_flac_is_lossless(client):
    text = "Lossless, please."
    response = client.audio.speech.create(model=MODEL_ID, input=text, voice="high", response_format="flac")
    assert response.content[:4] == b"fLaC"
    samples, rate = soundfile.read(io.BytesIO(response.content), dtype="int16")
    assert rate == SAMPLE_RATE
    np.testing.assert_array_equal(samples, expected_pcm(text, "high"))


def test_audio_returned_in_the_final_payload_is_served(client):
    text = "Whole utterance at once."
    response = client.audio.speech.create(
        model=MODEL_ID, input=text, voice="alloy", response_format="pcm", extra_body={"return_whole": True}
    )
    np.testing.assert_array_equal(np.frombuffer(response.content, "<i2"), expected_pcm(text, "alloy"))


def test_voice_object_form_is_accepted(client):
    text = "Custom voice object."
    response = client.audio.speech.create(model=MODEL_ID, input=text, voice={"id": "high"}, response_format="pcm")
    np.testing.assert_array_equal(np.frombuffer(response.content, "<i2"), expected_pcm(text, "high"))


def test_streaming_pcm_arrives_before_the_request_finishes(client, tmp_path):
    """The vocoder holds its second chunk until the client has the first: no buffering server can pass."""
    text = "Streaming sends chunks as they are produced by the vocoder."
    with client.audio.speech.with_streaming_response.create(
        model=MODEL_ID,
        input=text,
        voice="alloy",
        response_format="pcm",
        extra_body={"stream": True, "gate_dir": str(tmp_path)},
    ) as response:
        assert response.status_code == 200
        chunks = response.iter_bytes()
        first = next(chunks)
        assert len(first) > 0
        (tmp_path / "open").touch()
        body = first + b"".join(chunks)
    assert len(first) < len(body)
    np.testing.assert_array_equal(np.frombuffer(body, "<i2"), expected_pcm(text, "alloy"))


def test_streaming_wav_has_a_streaming_header(client):
    text = "A streamed wave file."
    with client.audio.speech.with_streaming_response.create(
        model=MODEL_ID, input=text, voice="alloy", response_format="wav", extra_body={"stream": True}
    ) as response:
        body = response.read()
    header, data = parse_wav(body)
    assert header["size"] == 0 and header["riff_size"] == 0  # "length unknown", not 0xFFFFFFFF (a 24-hour file)
    assert header["rate"] == SAMPLE_RATE
    np.testing.assert_array_equal(np.frombuffer(data, "<i2"), expected_pcm(text, "alloy"))
    samples = decode_with_ffmpeg(body)  # browsers and ffmpeg read such a stream to its end
    np.testing.assert_array_equal(samples, expected_pcm(text, "alloy"))


# -- errors -----------------------------------------------------------------


def _error(exc: openai.APIStatusError) -> dict:
    body = exc.response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.mark.parametrize(
    ("kwargs", "param", "code"),
    [
        ({"input": ""}, "input", "empty_input"),
        ({"input": "   "}, "input", "empty_input"),
        ({"response_format": "ogg"}, "response_format", "unsupported_response_format"),
        ({"speed": 4.5}, "speed", "invalid_value"),
        ({"speed": "fast"}, "speed", "invalid_type"),
        ({"stream_format": "chunks"}, "stream_format", "unsupported_stream_format"),
        ({"voice": "marin"}, "voice", "invalid_value"),  # OpenAI's newer voices: this model does not have them
        ({"voice": "cedar"}, "voice", "invalid_value"),
        ({"voice": "nobody"}, "voice", "invalid_value"),
        ({"extra_body": {"max_new_tokens": -5}}, "max_new_tokens", "invalid_value"),
        ({"extra_body": {"seed": "x"}}, "seed", "invalid_type"),
        ({"extra_body": {"seed": 2**70}}, "seed", "invalid_value"),
        ({"extra_body": {"my_field": 2**70}}, "my_field", "invalid_value"),
        ({"extra_body": {"text": "sneaky"}}, "text", "reserved_field"),
        ({"extra_body": {"ref_audio": "not base64!"}}, "ref_audio", "invalid_value"),
    ],
)
def test_bad_input_is_a_400_envelope(client, kwargs, param, code):
    request = {"model": MODEL_ID, "input": "fine text", "voice": "alloy", **kwargs}
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.speech.create(**request)
    error = _error(info.value)
    assert info.value.status_code == 400
    assert (error["param"], error["code"], error["type"]) == (param, code, "invalid_request_error")


def test_input_over_the_server_bound_is_a_413(client):
    with pytest.raises(openai.APIStatusError) as info:
        client.audio.speech.create(model=MODEL_ID, input="x" * 4097, voice="alloy")
    assert info.value.status_code == 413
    error = _error(info.value)
    assert (error["param"], error["code"]) == ("input", "string_above_max_length")


def test_input_over_the_models_declared_limit_is_a_400_from_the_server_without_reaching_a_worker(client):
    """The frontend's module declares REQUEST_LIMITS max_input_chars 3000 and its worker reported it at ready: the
    parent refuses a longer text itself (a text that reached the frontend would fail there with FAIL_FRONTEND, a 500)."""
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.speech.create(model=MODEL_ID, input="FAIL_FRONTEND " + "x" * 3000, voice="alloy")
    error = _error(info.value)
    assert (error["param"], error["code"], error["type"]) == ("input", "invalid_value", "invalid_request_error")
    assert "input is 3014 characters; this model accepts at most 3000" in error["message"]
    assert "declares max_input_chars" in error["message"] and "split the text into shorter requests" in error["message"]


def test_unknown_model_is_a_404_naming_the_served_model(client):
    with pytest.raises(openai.NotFoundError) as info:
        client.audio.speech.create(model="tts-1", input="hi", voice="alloy")
    error = _error(info.value)
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert "tts-1" in error["message"] and MODEL_ID in error["message"]


def test_missing_input_and_malformed_json(server):
    missing = httpx.post(f"{server.url}/v1/audio/speech", json={"model": MODEL_ID, "voice": "alloy"})
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == "missing_required_parameter"
    broken = httpx.post(f"{server.url}/v1/audio/speech", content=b"{not json", headers={"content-type": "application/json"})
    assert broken.status_code == 400
    assert broken.json()["error"]["code"] == "invalid_json"


def test_request_body_is_bounded(server):
    huge = b'{"model": "test/sine", "input": "' + b"a" * (1024 * 1024) + b'"}'
    response = httpx.post(f"{server.url}/v1/audio/speech", content=huge, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"


def test_stage_failure_is_a_500_with_the_stage_message(client):
    with pytest.raises(openai.InternalServerError) as info:
        client.audio.speech.create(model=MODEL_ID, input="please FAIL_VOCODER now", voice="alloy")
    error = _error(info.value)
    assert error["type"] == "server_error"
    assert "stage vocoder (process vocoder)" in error["message"]
    assert "RuntimeError: vocoder exploded on purpose" in error["message"]


def test_a_stage_rejecting_the_voice_is_a_400_and_fails_only_that_request(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.speech.create(model=MODEL_ID, input="who am I", voice="nobody")
    error = _error(info.value)
    assert error["param"] == "voice" and "unknown voice 'nobody'" in error["message"]
    assert "Traceback" not in error["message"]
    ok = client.audio.speech.create(model=MODEL_ID, input="still fine", voice="alloy", response_format="pcm")
    np.testing.assert_array_equal(np.frombuffer(ok.content, "<i2"), expected_pcm("still fine", "alloy"))


def test_failure_mid_stream_truncates_the_response(server):
    body = {"model": MODEL_ID, "input": "this will FAIL_MIDSTREAM after one chunk", "voice": "alloy", "response_format": "pcm", "stream": True}
    with pytest.raises(httpx.RemoteProtocolError):
        with httpx.stream("POST", f"{server.url}/v1/audio/speech", json=body, timeout=60) as response:
            assert response.status_code == 200
            for _ in response.iter_bytes():
                pass


def test_unknown_route_uses_the_envelope(server):
    response = httpx.get(f"{server.url}/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"


@pytest.mark.parametrize("path", ["/", "/docs", "/redoc", "/openapi.json"])
def test_no_served_page_loads_anything_from_outside_the_server(server, path):
    """FastAPI's /docs and /redoc pull Swagger and ReDoc from a CDN: they are off; the page at / ships everything."""
    response = httpx.get(f"{server.url}{path}")
    if path in ("/docs", "/redoc"):
        assert response.status_code == 404 and response.json()["error"]["type"] == "not_found_error"
    else:
        assert response.status_code == 200
        assert not re.findall(r"(?:src|href)=[\"']?(?:https?:)?//", response.text), response.text[:500]


# -- cancellation -------------------------------------------------------------


def _wait_for_marker(markers: Path, suffix: str, timeout: float = 30.0) -> Path:
    deadline = time.monotonic() + timeout
    while True:
        found = sorted(markers.glob(f"*.{suffix}"))
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"the vocoder never wrote a .{suffix} marker"
        time.sleep(0.02)


def _gated(tmp_path: Path) -> tuple[Path, Path]:
    gate, markers = tmp_path / "gate", tmp_path / "markers"
    gate.mkdir()
    markers.mkdir()
    return gate, markers


def test_client_disconnect_mid_stream_cancels_the_request_in_the_stage(server, tmp_path):
    gate, markers = _gated(tmp_path)
    body = {
        "model": MODEL_ID,
        "input": "a long utterance nobody will listen to",
        "voice": "alloy",
        "response_format": "pcm",
        "stream": True,
        "gate_dir": str(gate),
        "marker_dir": str(markers),
    }
    with httpx.stream("POST", f"{server.url}/v1/audio/speech", json=body, timeout=60) as response:
        assert response.status_code == 200
        assert next(response.iter_raw())
    # leaving the block closed the connection while the vocoder waited on the gate
    _wait_for_marker(markers, "cancelled")
    assert not list(markers.glob("*.finished"))


def test_client_disconnect_before_any_audio_cancels_the_request(server, tmp_path):
    """A non-streaming client that hangs up while the vocoder works: the vocoder is told to stop."""
    gate, markers = _gated(tmp_path)
    body = json.dumps(
        {"model": MODEL_ID, "input": "never read", "voice": "alloy", "response_format": "wav", "gate_dir": str(gate), "marker_dir": str(markers)}
    ).encode()
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        _wait_for_marker(markers, "waiting")  # the vocoder holds the request at its gate
    _wait_for_marker(markers, "cancelled")
    assert not list(markers.glob("*.finished"))


# -- models, health, metrics -------------------------------------------------


def test_models_lists_the_served_model(client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL_ID]
    assert client.models.retrieve(MODEL_ID).id == MODEL_ID


def test_health_reports_every_process(server):
    response = httpx.get(f"{server.url}/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["processes"] == {"frontend": "ready", "vocoder": "ready"}


def test_metrics_count_requests_stages_and_queues(client, server):
    before = _metrics(server.url)
    client.audio.speech.create(model=MODEL_ID, input="count me", voice="alloy", response_format="pcm")
    with pytest.raises(openai.BadRequestError):
        client.audio.speech.create(model=MODEL_ID, input="", voice="alloy")
    after = _metrics(server.url)
    model = ("model", MODEL_ID)
    ok = ("omni_requests_total", (("endpoint", "/v1/audio/speech"), model, ("status", "200")))
    bad = ("omni_requests_total", (("endpoint", "/v1/audio/speech"), model, ("status", "400")))
    assert after[ok] == before.get(ok, 0) + 1
    assert after[bad] == before.get(bad, 0) + 1
    for stage in ("frontend", "vocoder"):
        key = ("omni_stage_latency_seconds_count", (model, ("stage", stage)))
        assert after[key] == before.get(key, 0) + 1
    latency = ("omni_request_latency_seconds_count", (("endpoint", "/v1/audio/speech"), model))
    assert after[latency] == before.get(latency, 0) + 2
    audio = ("omni_audio_seconds_total", (model,))
    assert after[audio] - before.get(audio, 0) == pytest.approx(len("count me") * 0.01, abs=1e-3)
    chars = ("omni_input_characters_total", (model,))
    assert after[chars] - before.get(chars, 0) == len("count me")
    for process in ("frontend", "vocoder"):
        assert ("omni_queue_depth", (("process", process),)) in after
        rss = next(v for (name, labels), v in after.items() if name == "omni_worker_resident_memory_bytes" and ("process", process) in labels)
        assert rss > 10 * 2**20  # a Python worker with torch: tens of MB, read from its own pid
        assert any(name == "omni_worker_cpu_seconds_total" and ("process", process) in labels for name, labels in after)
    assert after[("omni_runtime_healthy", ())] == 1.0
    assert after[("process_resident_memory_bytes", ())] > 10 * 2**20
    assert ("process_cpu_seconds_total", ()) in after
    build = next(labels for name, labels in after if name == "omni_build_info")
    assert dict(build)["omni_runtime"] and dict(build)["pipeline"] == MODEL_ID


def _metrics(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(f"{url}/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


# -- every OpenAI format, whole and streamed, through the official client -----------------

LOSSY_SLACK = {"mp3": 2 * 1152 + 1200, "aac": 2048 + 1024, "opus": 960}
"""Samples a lossy container may add: encoder priming and the last frame's padding (never fewer samples)."""


def _dominant_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64)))
    return float(np.argmax(spectrum) * rate / len(samples))


def _check_audio(fmt: str, body: bytes, text: str, voice: str) -> None:
    expected = expected_pcm(text, voice)
    if fmt == "pcm":
        np.testing.assert_array_equal(np.frombuffer(body, "<i2"), expected)
        return
    import av

    with av.open(io.BytesIO(body)) as container:
        rate = container.streams.audio[0].rate
        decoded = np.concatenate([f.to_ndarray().reshape(-1).astype(np.float64) for f in container.decode(audio=0)])
    if fmt in ("wav", "flac"):
        np.testing.assert_array_equal(decoded.astype(np.int16), expected)
        return
    want = len(expected) * rate // SAMPLE_RATE
    assert want <= len(decoded) <= want + LOSSY_SLACK[fmt] * rate // SAMPLE_RATE, (fmt, len(decoded), want)
    freq, _ = plan(text, voice, 1.0, SAMPLE_RATE)
    assert abs(_dominant_hz(decoded, rate) - freq) < 15, fmt  # it is the pipeline's tone, not noise


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav", "pcm"])
def test_every_format_decodes_to_the_pipelines_audio(client, fmt):
    text = f"A tone in {fmt}, long enough to hear."
    whole = client.audio.speech.create(model=MODEL_ID, input=text, voice="high", response_format=fmt)
    _check_audio(fmt, whole.content, text, "high")
    with client.audio.speech.with_streaming_response.create(
        model=MODEL_ID, input=text, voice="high", response_format=fmt, stream_format="audio"
    ) as response:
        assert response.headers.get("transfer-encoding") == "chunked"
        streamed = b"".join(response.iter_bytes())
    _check_audio(fmt, streamed, text, "high")


def test_default_format_is_mp3_like_openai(client):
    response = client.audio.speech.create(model=MODEL_ID, input="default format", voice="alloy")
    assert response.response.headers["content-type"] == "audio/mpeg"
    _check_audio("mp3", response.content, "default format", "alloy")


def test_sse_stream_has_openais_events(client):
    text = "Events, please."
    with client.audio.speech.with_streaming_response.create(
        model=MODEL_ID, input=text, voice="alloy", response_format="pcm", stream_format="sse"
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[len("data: "):]) for line in response.iter_lines() if line.startswith("data: ")]
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    assert deltas and events[-1]["type"] == "speech.audio.done"
    assert set(events[-1]["usage"]) == {"input_tokens", "output_tokens", "total_tokens"}
    import base64

    pcm = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    np.testing.assert_array_equal(np.frombuffer(pcm, "<i2"), expected_pcm(text, "alloy"))


def test_request_id_is_honoured_and_echoed(client, server):
    response = client.audio.speech.with_raw_response.create(
        model=MODEL_ID, input="who asked", voice="alloy", response_format="pcm", extra_headers={"X-Request-Id": "client-42"}
    )
    assert response.headers["x-request-id"] == "client-42"
    generated = httpx.get(f"{server.url}/v1/models").headers["x-request-id"]
    assert len(generated) >= 16
    bad = httpx.post(f"{server.url}/v1/audio/speech", json={"input": ""}, headers={"X-Request-Id": "err-7"})
    assert bad.status_code == 400 and bad.headers["x-request-id"] == "err-7"


def test_voices_endpoint_lists_the_pipelines_presets(server):
    body = httpx.get(f"{server.url}/v1/audio/voices").json()
    assert body["object"] == "list" and [v["id"] for v in body["data"]] == ["alloy", "low", "high"]


def test_instructions_reach_the_entry_stage(client):
    with pytest.raises(openai.InternalServerError) as info:
        client.audio.speech.create(model=MODEL_ID, input="styled", voice="alloy", instructions="FAIL_ON_INSTRUCTIONS")
    assert "instructions reached the frontend" in _error(info.value)["message"]
