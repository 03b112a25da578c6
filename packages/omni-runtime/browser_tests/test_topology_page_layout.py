"""The topology page's drawing of a split espeak pipeline run on the CPU, in headless Chromium.

preprocessing -> tts_engine is in-process and tts_engine -> vocoder crosses processes: the two
edges must not meet at one point, no two edge labels may overlap, and a run on the CPU must not
label its processes with the GPU id the config declares (``gpu: 0`` on the vocoder).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from serving.conftest import assert_clean_exit, shm_segments, start_server, wait_healthy
from test_topology_page import HAVE_BROWSER, _wait

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not HAVE_BROWSER and not os.environ.get("OMNI_REQUIRE_BROWSER"), reason="needs Debian's chromium and chromium-driver"),
]


@pytest.fixture(scope="module")
def split_url():
    import omni_models.espeak

    espeak = Path(omni_models.espeak.__file__).parent / "pipeline.yaml"
    before = shm_segments()
    server = start_server("--stages.vocoder.process", "vocoder", "--stages.vocoder.gpu", "0", config=espeak)
    try:
        wait_healthy(server.url)
        yield server.url
    finally:
        assert_clean_exit(server, before)


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
