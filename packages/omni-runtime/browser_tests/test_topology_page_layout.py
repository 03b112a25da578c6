"""The topology page's drawing of a split espeak pipeline run on the CPU, in headless Chromium.

preprocessing -> tts_engine is in-process and tts_engine -> vocoder crosses processes: the two
edges must not meet at one point, no two edge labels may overlap, and a run on the CPU must not
label its processes with the GPU id the config declares (``gpu: 0`` on the vocoder).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading

import pytest
from test_topology_page import CHROMEDRIVER, CHROMIUM, FLAGS, HAVE_BROWSER, _wait

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not HAVE_BROWSER and not os.environ.get("OMNI_REQUIRE_BROWSER"), reason="needs Debian's chromium and chromium-driver"),
]


@pytest.fixture(scope="module")
def split_url():
    proc = subprocess.Popen(
        [sys.executable, "-m", "omni_runtime.cli", "serve", "--device", "cpu", "--port", "0", "--log-level", "warning",
         "--stages.vocoder.process", "vocoder", "--stages.vocoder.gpu", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
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


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_window_size(1400, 1000)
    try:
        yield driver
    finally:
        driver.quit()


ENDPOINTS = """
const out = [];
for (const g of document.querySelectorAll("g.edge")) {
  const nums = g.querySelector("path").getAttribute("d").match(/-?[0-9.]+/g).map(Number);
  out.push({kind: g.getAttribute("class").split(" ")[1], src: g.dataset.src, dst: g.dataset.dst,
            start: nums.slice(0, 2), end: nums.slice(-2)});
}
return out;
"""
LABELS = """
return Array.from(document.querySelectorAll("text.edge-label")).map((t) => {
  const b = t.getBBox(); return {text: t.textContent, x: b.x, y: b.y, w: b.width, h: b.height};
});
"""


def test_edges_do_not_meet_labels_do_not_overlap_and_a_cpu_run_shows_no_gpu_ids(split_url, browser):
    browser.get(split_url + "/")
    _wait(browser, "return document.querySelectorAll('g.edge').length >= 2", what="the edges to be drawn")
    edges = browser.execute_script(ENDPOINTS)
    inner = next(e for e in edges if (e["src"], e["dst"]) == ("preprocessing", "tts_engine"))
    cross = next(e for e in edges if (e["src"], e["dst"]) == ("tts_engine", "vocoder"))
    assert inner["kind"] == "same" and cross["kind"] == "cross"
    gap = max(abs(a - b) for a, b in zip(inner["end"], cross["start"]))
    assert gap >= 4, f"the in-process edge ends where the cross-process edge starts: {inner} {cross}"
    labels = browser.execute_script(LABELS)
    assert len(labels) >= 2
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            apart = a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"] or a["y"] + a["h"] <= b["y"] or b["y"] + b["h"] <= a["y"]
            assert apart, f"labels overlap: {a} {b}"
    titles = browser.execute_script("return Array.from(document.querySelectorAll('.instance-title')).map((t) => t.textContent)")
    assert titles and all("GPU" not in t for t in titles) and any("CPU" in t for t in titles), titles
