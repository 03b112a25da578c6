"""A request past ``omni serve --request-timeout`` is dropped: the client gets its 504 at the deadline, the batch moves on.

The stage sees the deadline as ``ctx.deadline`` (a ``time.monotonic()``
instant on its worker's clock); the AR stage's step scheduler drops the
request from its batch there (and the runtime cancels it in every stage), so
the engine is free for the next request instead of generating audio nobody
waits for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

MODEL = "fishaudio/s2-pro"
TIMEOUT_S = 1.0
LONG_TEXT = " ".join(["The deadline passes long before this could all be spoken."] * 6)  # under the 400-byte limit


def _serve(*args: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    cmd = [sys.executable, "-c", "import sys; from omni_runtime.cli import main; sys.exit(main())", "serve", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("omni: serving ") and " on http://" in line:
                found.append(line.split(" on ", 1)[1].split()[0])
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(240) or not found:
        proc.kill()
        raise AssertionError("omni serve did not come up:\n" + "".join(lines))
    return proc, found[0], lines


def _speech(url: str, text: str) -> tuple[int, dict, float]:
    body = json.dumps({"model": MODEL, "input": text, "response_format": "pcm"}).encode()
    request = urllib.request.Request(f"{url}/v1/audio/speech", data=body, headers={"Content-Type": "application/json"})
    began = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            response.read()
            return response.status, {}, time.monotonic() - began
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}"), time.monotonic() - began


@pytest.mark.timeout(420)
def test_a_request_past_its_deadline_is_dropped_and_the_engine_serves_the_next(tmp_path):
    proc, url, lines = _serve("--model", MODEL, "--device", "cpu", "--port", "0", "--request-timeout", str(TIMEOUT_S), "--log-level", "info")
    try:
        status, error, seconds = _speech(url, LONG_TEXT)
        assert status == 504, "".join(lines)
        assert error["error"]["code"] == "deadline_exceeded"
        assert seconds < 60  # at the deadline, not after the whole paragraph was generated
        status, _, _ = _speech(url, "Short.")
        assert status == 200, "".join(lines)
        metrics = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
        depths = [line for line in metrics.splitlines() if line.startswith("omni_queue_depth{")]
        assert depths and all(line.endswith(" 0.0") for line in depths), depths
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
