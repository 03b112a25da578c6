"""Operator options of ``omni serve``: API key, CORS, root path, OMNI_* variables, early /health, progress."""

from __future__ import annotations

import subprocess
import threading
import time

import httpx
import openai
import pytest

from .conftest import (
    SLOW_PIPELINE,
    assert_clean_exit,
    omni_command,
    omni_env,
    shm_segments,
    start_server,
    wait_healthy,
)

pytestmark = pytest.mark.timeout(300)
KEY = "sk-test-0123456789"
ORIGIN = "https://app.example.com"


@pytest.fixture(scope="module")
def guarded():
    """Key and origins from the environment (OMNI_API_KEY, OMNI_ALLOWED_ORIGINS), root path from a flag."""
    shm_before = shm_segments()
    running = start_server("--root-path", "/tts", env={"OMNI_API_KEY": KEY, "OMNI_ALLOWED_ORIGINS": ORIGIN})
    try:
        wait_healthy(running.url)
        yield running
    finally:
        assert_clean_exit(running, shm_before)


def test_api_key_is_required_on_v1_routes(guarded):
    anonymous = openai.OpenAI(base_url=f"{guarded.url}/v1", api_key="wrong", max_retries=0, timeout=60)
    with pytest.raises(openai.AuthenticationError) as info:
        anonymous.audio.speech.create(model="test/sine", input="hi", voice="alloy")
    assert info.value.response.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(f"{guarded.url}/v1/models").status_code == 401
    client = openai.OpenAI(base_url=f"{guarded.url}/v1", api_key=KEY, max_retries=0, timeout=60)
    audio = client.audio.speech.create(model="test/sine", input="hi", voice="alloy", response_format="pcm")
    assert len(audio.content) > 0
    assert httpx.get(f"{guarded.url}/health").status_code == 200  # probes need no key


def test_cors_allows_only_the_configured_origin(guarded):
    preflight = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}
    ok = httpx.options(f"{guarded.url}/v1/audio/speech", headers=preflight)
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == ORIGIN
    other = httpx.options(f"{guarded.url}/v1/audio/speech", headers={**preflight, "Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


def test_root_path_prefixes_the_openapi_and_page_links(guarded):
    spec = httpx.get(f"{guarded.url}/openapi.json").json()
    assert spec["servers"] == [{"url": "/tts"}]
    page = httpx.get(f"{guarded.url}/").text
    assert 'fetch("v1/topology"' in page  # relative links keep working under the proxy's prefix


def test_bad_environment_value_is_a_usage_error():
    result = subprocess.run(
        omni_command("serve", "--config", str(SLOW_PIPELINE), "--port", "0"),
        env=omni_env(OMNI_MAX_BODY_BYTES="lots"), capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1  # a user mistake, like every other (docs: exit codes)
    assert "OMNI_MAX_BODY_BYTES='lots'" in result.stderr and "Traceback" not in result.stderr


def test_health_answers_starting_while_the_pipeline_loads_then_progress_is_shown(tmp_path):
    """The slow pipeline's loader takes seconds to build; /health must answer at once meanwhile."""
    proc = subprocess.Popen(
        omni_command("serve", "--config", str(SLOW_PIPELINE), "--port", "0", "--log-level", "warning"),
        env=omni_env(SERVING_TEST_PID_DIR=str(tmp_path)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    lines: list[str] = []
    listening = threading.Event()

    def pump() -> None:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("omni: listening on "):
                listening.set()
        listening.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        assert listening.wait(120), "".join(lines)
        url = next(line for line in lines if line.startswith("omni: listening on ")).split()[3]
        started = time.monotonic()
        health = httpx.get(f"{url}/health", timeout=5)
        assert time.monotonic() - started < 2
        assert health.status_code == 503 and health.json()["status"] == "starting"
        speech = httpx.post(f"{url}/v1/audio/speech", json={"input": "too early"}, timeout=10)
        assert speech.status_code == 503 and speech.json()["error"]["code"] == "starting"
        assert speech.headers["retry-after"]
        (tmp_path / "release").touch()  # the loader finishes "loading"
        deadline = time.monotonic() + 120
        while not any(line.startswith("omni: serving ") for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
            time.sleep(0.1)
        assert any(line.startswith("omni: process loader ready") and "stages: loader" in line for line in lines), "".join(lines)
        assert httpx.get(f"{url}/health", timeout=5).status_code == 200
    finally:
        proc.terminate()
        proc.wait(60)
