"""Identical requests to the espeak reference pipeline get byte-identical audio, whatever was spoken before.

libespeak-ng carries its generator state from one utterance to the next; the engine puts
it back before each one. Checked where a user meets it: one ``omni serve`` process
answering the same request before and after other requests (other text, another voice).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading

import httpx
import pytest

pytestmark = pytest.mark.timeout(300)
TEXT = "The quick brown fox jumps over the lazy dog. Call me at 5 pm!"


@pytest.fixture(scope="module")
def espeak_server():
    proc = subprocess.Popen(
        [sys.executable, "-m", "omni_runtime.cli", "serve", "--device", "cpu", "--port", "0", "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    found: dict[str, str] = {}
    ready = threading.Event()

    def pump() -> None:
        for line in proc.stdout:
            match = re.search(r"omni: serving .* on (http://\S+)", line)
            if match:
                found["url"] = match.group(1)
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        assert ready.wait(240) and "url" in found, "omni serve did not start"
        yield found["url"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def _speak(url: str, text: str, voice: str = "en-us") -> bytes:
    response = httpx.post(f"{url}/v1/audio/speech", json={"input": text, "voice": voice, "response_format": "pcm"}, timeout=120)
    assert response.status_code == 200, response.text
    return response.content


def test_the_same_request_gets_the_same_bytes_before_and_after_other_requests(espeak_server):
    first = _speak(espeak_server, TEXT)
    again = _speak(espeak_server, TEXT)
    _speak(espeak_server, "Something else entirely, said in between?")
    _speak(espeak_server, TEXT, voice="en-us+f3")
    last = _speak(espeak_server, TEXT)
    assert len(first) > 24_000 * 2  # real speech: over a second of 16-bit samples
    assert first == again == last


def test_another_voice_is_also_repeatable(espeak_server):
    assert _speak(espeak_server, TEXT, voice="en-us+f3") == _speak(espeak_server, TEXT, voice="en-us+f3")
