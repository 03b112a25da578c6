"""Small but real: no silently open server, malformed uploads are 400s naming the field, a client's
mistake inside a stage is one log line, and every user mistake of ``omni`` exits 1."""

from __future__ import annotations

import base64
import io
import subprocess
import time
import wave

import httpx
import pytest

from .conftest import PIPELINE, assert_clean_exit, omni_command, omni_env, run_omni, shm_segments, start_server, wait_healthy
from .test_faults import SPEECH_BODY

pytestmark = pytest.mark.timeout(300)


def _serve_exits(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(omni_command("serve", "--config", str(PIPELINE), "--port", "0", *args), env=omni_env(**env),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("args", "env", "named"), [
    (("--api-key", ""), {}, "--api-key is empty"),
    (("--api-key", "   "), {}, "--api-key is empty"),
    ((), {"OMNI_API_KEY": ""}, "OMNI_API_KEY is set but empty"),
], ids=["empty flag", "blank flag", "empty variable"])
def test_an_empty_api_key_is_a_start_up_error_not_an_open_server(args, env, named):
    result = _serve_exits(*args, **env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert named in result.stderr and "fix:" in result.stderr
    assert "Traceback" not in result.stderr and "omni: serving" not in result.stdout


def _wav(rate: int = 16000, frames: int = 1600, width: int = 2) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(width)
        handle.setframerate(rate)
        handle.writeframes(b"\x01\x00" * frames * (width // 2))
    return out.getvalue()


def _rate_zero() -> bytes:
    data = bytearray(_wav())
    data[24:28] = (0).to_bytes(4, "little")  # the fmt chunk's sample rate
    return bytes(data)


@pytest.fixture(scope="module")
def info_server():
    shm_before = shm_segments()
    server = start_server("--log-level", "info")
    try:
        wait_healthy(server.url)
        yield server
    finally:
        assert_clean_exit(server, shm_before)


@pytest.mark.parametrize(("audio", "says"), [
    (_rate_zero(), "sample rate of 0 Hz"),
    (_wav()[:300], "truncated"),
    (b"this is not audio at all" * 10, "not a WAV file"),
    (_wav(frames=0), "no audio frames"),
], ids=["sample rate 0", "truncated", "not audio", "no frames"])
def test_a_malformed_ref_audio_is_a_400_naming_the_field(info_server, audio, says):
    body = {**SPEECH_BODY, "input": "clone me", "ref_audio": base64.b64encode(audio).decode()}
    response = httpx.post(f"{info_server.url}/v1/audio/speech", json=body, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"], error["type"]) == ("ref_audio", "invalid_value", "invalid_request_error")
    assert says in error["message"]


def test_a_well_formed_ref_audio_passes_the_front_end(info_server):
    # one second: inline reference audio is bounded to 0.5-30 s like an uploaded voice
    body = {**SPEECH_BODY, "input": "clone me", "ref_audio": base64.b64encode(_wav(frames=16000)).decode()}
    assert httpx.post(f"{info_server.url}/v1/audio/speech", json=body, timeout=60).status_code == 200


def test_a_client_mistake_inside_a_stage_logs_one_line_without_a_traceback(info_server):
    before = len(info_server.lines)
    response = httpx.post(f"{info_server.url}/v1/audio/speech", json={**SPEECH_BODY, "input": "hi", "voice": "nobody"}, timeout=60)
    assert response.status_code == 400 and response.json()["error"]["param"] == "voice"
    wait_healthy(info_server.url)
    new = "".join(info_server.lines[before:])
    assert "Traceback" not in new
    refused = [line for line in new.splitlines() if "refused by stage" in line]
    assert len(refused) == 1 and "unknown voice 'nobody'" in refused[0] and " INFO " in refused[0], new


def test_an_unknown_voice_in_synthesize_is_a_user_mistake_exit_1(tmp_path):
    result = run_omni("synthesize", "hello", "-o", str(tmp_path / "x.wav"), "--config", str(PIPELINE), "--voice", "nobody")
    assert result.returncode == 1, result.stderr
    assert "unknown voice 'nobody'" in result.stderr and "--voice" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [
    ("synthesize", "hello", "-o", "x.wav", "--model", "no/such-model"),
    ("serve", "--no-such-flag"),
    ("synthesize",),
], ids=["unknown model", "unknown flag", "missing argument"])
def test_every_user_mistake_exits_1(args, tmp_path):
    result = run_omni(*args, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_an_alias_bomb_config_is_one_error_line_not_a_memory_error(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    blob = "x" * 65536
    bomb.write_text(f"extends: {PIPELINE}\nstages:\n  - name: vocoder\n    factory_args:\n      chunk_seconds: [&a \"{blob}\", "
                    + ", ".join(["*a"] * 99_000) + "]\n")
    result = run_omni("synthesize", "hello", "-o", str(tmp_path / "x.wav"), "--config", str(bomb))
    assert result.returncode == 1, result.stderr[-2000:]
    assert "expands to more than" in result.stderr and len(result.stderr) < 2000
    assert "MemoryError" not in result.stderr and "Traceback" not in result.stderr


def _transport_bytes(url: str) -> dict[tuple[str, str, str], float]:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    out = {}
    for line in text.splitlines():
        if line.startswith("omni_transport_bytes_total{"):
            labels, value = line[len("omni_transport_bytes_total{"):].split("} ")
            parts = dict(item.split("=", 1) for item in labels.split(","))
            out[(parts["src"].strip('"'), parts["dst"].strip('"'), parts["transport"].strip('"'))] = float(value)
    return out


def test_transport_bytes_count_the_local_backends_ipc_and_shared_memory(info_server):
    body = {**SPEECH_BODY, "input": "long enough to travel in shared memory. " * 50, "return_whole": True}  # 20 s of audio
    assert httpx.post(f"{info_server.url}/v1/audio/speech", json=body, timeout=60).status_code == 200
    deadline = time.monotonic() + 30
    while True:  # workers publish their counts a quarter of a second after sending
        sent = _transport_bytes(info_server.url)
        if sent.get(("vocoder", "@parent", "shm"), 0) > 0 or time.monotonic() > deadline:
            break
    assert sent.get(("@parent", "frontend", "ipc"), 0) > 0
    assert sent.get(("frontend", "vocoder", "ipc"), 0) > 0
    assert sent.get(("vocoder", "@parent", "shm"), 0) >= 1 << 20  # 20 s of float32 audio: over the codec's 1 MiB shared-memory threshold
