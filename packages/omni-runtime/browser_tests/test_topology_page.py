"""The page at ``/`` of a real ``omni serve``, in Debian's headless Chromium driven by selenium.

Checks what a user looks at: every process instance of the topology is drawn and
turns ready, a synthesis from the form plays audio of the requested length in the
page, and a worker killed with SIGKILL is shown as dead. Run by ``nox -s browser``
(which installs selenium; CI installs chromium and chromium-driver with apt).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
from conftest import CHROMEDRIVER, CHROMIUM

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

from serving.conftest import SAMPLE_RATE, assert_clean_exit, shm_segments, start_server, wait_healthy  # noqa: E402
from serving.stages import plan  # noqa: E402

HAVE_BROWSER = os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not HAVE_BROWSER and not os.environ.get("OMNI_REQUIRE_BROWSER"), reason="needs Debian's chromium and chromium-driver"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    pids = tmp_path_factory.mktemp("pids")
    before = shm_segments()
    # fail-stop vocoder (no restart budget): the killed worker must stay dead for the page to show it
    server = start_server("--processes.vocoder.restart.max_restarts", "0", env={"SERVING_TEST_PID_DIR": str(pids)})
    try:
        wait_healthy(server.url)
        yield server, pids
    finally:
        if server.proc.poll() is None:
            assert_clean_exit(server, before)


def _wait(driver, condition, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(condition)
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_page_draws_every_instance_plays_a_synthesis_and_shows_a_dead_worker(served, browser, tmp_path):
    server, pids = served
    browser.get(server.url + "/")
    drawn = _wait(browser, "return Array.from(document.querySelectorAll('g.instance')).map(g => g.dataset.instance)", what="the drawing")
    assert sorted(drawn) == ["frontend", "vocoder"]
    _wait(browser, "return Array.from(document.querySelectorAll('g.instance')).every(g => g.dataset.state === 'ready')", what="ready states")
    label = browser.execute_script("return document.querySelector('#instance-vocoder .instance-state').textContent")
    assert label.startswith("ready · queue 0 · pid ")
    edge = browser.execute_script("return document.querySelector('g.edge[data-src=frontend][data-dst=vocoder]').dataset.transport")
    assert "ZeroMQ" in edge
    _wait(browser, "return document.querySelector('g.edge[data-src=frontend][data-dst=vocoder]').dataset.liveTransport === 'ipc'", what="the live transport")

    text = "The page plays exactly this much audio."
    browser.execute_script(
        "document.getElementById('synth-input').value = arguments[0];"
        "document.getElementById('synth-voice').value = 'low';"
        "document.getElementById('synth-format').value = 'wav';",
        text,
    )
    browser.find_element("id", "synth-go").click()
    _wait(browser, "return document.getElementById('synth-status').dataset.state === 'done'", what="the synthesis")
    duration = _wait(browser, "const a = document.getElementById('synth-audio'); return isFinite(a.duration) && a.duration > 0 ? a.duration : null", what="audio metadata")
    _, samples = plan(text, "low", 1.0, SAMPLE_RATE)
    assert duration == pytest.approx(samples / SAMPLE_RATE, abs=0.01)
    _wait(browser, "const a = document.getElementById('synth-audio'); return a.currentTime > 0 || a.ended", what="playback to start")
    browser.save_screenshot(str(tmp_path / "page-ready.png"))

    os.kill(int((pids / "vocoder.pid").read_text()), signal.SIGKILL)
    _wait(browser, "return document.getElementById('instance-vocoder').dataset.state === 'dead'", what="the dead worker")
    assert browser.execute_script("return document.getElementById('instance-frontend').dataset.state") == "ready"
    assert "dead" in browser.execute_script("return document.querySelector('#instance-vocoder .instance-state').textContent")
    status = browser.execute_script("return document.getElementById('status-line').dataset.status")
    assert status != "ok"
    browser.save_screenshot(str(tmp_path / "page-dead.png"))
    shot = os.environ.get("OMNI_PAGE_SCREENSHOT")
    if shot:
        shutil.copy(tmp_path / "page-dead.png", shot)
