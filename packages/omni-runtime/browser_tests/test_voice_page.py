"""The page's live mode (WebSocket) and voice upload form, in headless Chromium against a real ``omni serve``.

The server runs Qwen3-TTS (seeded dummy weights on the CPU): a model that clones voices, so
the upload form goes the whole way (the model's encoder stage computes the artefacts).
Run by ``nox -s browser``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
import test_topology_page as page_tests  # noqa: E402
from serving.conftest import assert_clean_exit, shm_segments, start_server, wait_healthy  # noqa: E402

browser = page_tests.browser  # the same headless Chromium fixture as the topology page test
_wait = page_tests._wait
HAVE_BROWSER = page_tests.HAVE_BROWSER
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not HAVE_BROWSER and not os.environ.get("OMNI_REQUIRE_BROWSER"), reason="needs Debian's chromium and chromium-driver"),
]


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    from importlib import resources

    pipeline = resources.files("omni_models").joinpath("qwen3_tts", "pipeline.yaml")
    before = shm_segments()
    server = start_server("--voices-dir", str(tmp_path_factory.mktemp("voices")), config=pipeline)
    try:
        wait_healthy(server.url, timeout=120)
        yield server
    finally:
        assert_clean_exit(server, before)


def _type(browser, text: str) -> None:
    box = browser.find_element("id", "live-input")
    for word in text.split(" "):
        box.send_keys(word + " ")


def test_live_mode_speaks_while_typing_and_stop_barges_in(qwen3, browser):
    browser.get(qwen3.url + "/")
    _type(browser, "Typing in the page, every clause is spoken. And then the next sentence follows.")
    _wait(browser, "return document.getElementById('live-status').dataset.firstAudioMs", timeout=60, what="audio while typing")
    browser.find_element("id", "live-input").send_keys("\n")  # Enter ends the answer
    _wait(browser, "return document.getElementById('live-status').dataset.state === 'done'", timeout=120, what="the answer")
    done = browser.execute_script("return Object.assign({}, document.getElementById('live-status').dataset)")
    assert int(done["segments"]) >= 2 and float(done["audioSeconds"]) > 0.5

    long_text = " ".join(f"Sentence {n} keeps the engine busy for a while." for n in range(20))
    browser.execute_script("const box = document.getElementById('live-input'); box.value = arguments[0];"
                           "box.dispatchEvent(new Event('input'));", long_text)
    browser.find_element("id", "live-done").click()
    _wait(browser, "return document.getElementById('live-status').dataset.state === 'speaking' && "
                   "Number(document.getElementById('live-status').dataset.audioSeconds) > 0", timeout=60, what="the long answer")
    browser.find_element("id", "live-stop").click()
    _wait(browser, "return document.getElementById('live-status').dataset.state === 'cancelled'", timeout=30, what="the barge-in")
    assert int(browser.execute_script("return document.getElementById('live-status').dataset.segments")) < 20


def test_upload_form_adds_a_voice(qwen3, browser, tmp_path):
    rate = 16000
    t = np.arange(2 * rate) / rate
    path = tmp_path / "my-voice.wav"
    soundfile.write(path, (0.3 * np.sin(2 * np.pi * 200 * t)).astype(np.float32), rate)
    browser.get(qwen3.url + "/")
    browser.find_element("id", "voice-file").send_keys(str(path))
    browser.find_element("id", "voice-name").send_keys("page voice")
    browser.find_element("id", "voice-ref-text").send_keys("A recording from the page.")
    browser.find_element("id", "voice-go").click()
    _wait(browser, "return ['done', 'error'].includes(document.getElementById('voice-status').dataset.state)", timeout=120, what="the upload")
    assert browser.execute_script("return document.getElementById('voice-status').dataset.state") == "done", \
        browser.execute_script("return document.getElementById('voice-status').textContent")
    voice_id = browser.execute_script("return document.getElementById('voice-status').dataset.voiceId")
    card = httpx.get(f"{qwen3.url}/v1/audio/voices/{voice_id}", timeout=10).json()
    assert card["name"] == "page voice" and card["ref_text"] == "A recording from the page."
    options = browser.execute_script("return Array.from(document.querySelectorAll('#synth-voices option')).map(o => o.value)")
    assert "page voice" in options
