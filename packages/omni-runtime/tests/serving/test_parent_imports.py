"""No model code in the parent: ``omni serve`` learns the voices from its workers, never by importing a stage module or torch.

The server process runs ``omni serve`` (the CLI's own ``main``) with a probe
thread beside it: once ``/health`` answers 200 the probe records which modules
the server process has loaded and which voices it lists, synthesizes once
(the result path: tensors decoded into numpy arrays, encoded as WAV), records
the modules again, then stops it the way an operator does (SIGTERM).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from .conftest import PIPELINE, omni_env

PROBE = r"""
import json, os, signal, sys, threading, time, urllib.request
from omni_runtime.cli import main

out, port = sys.argv[1], sys.argv[2]

def probe():
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(base + "/health", timeout=5).status == 200:
                break
        except Exception:
            time.sleep(0.1)
    voices = json.load(urllib.request.urlopen(base + "/v1/audio/voices", timeout=5))
    page = urllib.request.urlopen(base + "/", timeout=5).read().decode()
    at_start = sorted(sys.modules)
    body = json.dumps({"model": "test/sine", "input": "Hello there.", "voice": "alloy", "response_format": "wav"}).encode()
    speech = urllib.request.Request(base + "/v1/audio/speech", data=body, headers={"Content-Type": "application/json"})
    wav = urllib.request.urlopen(speech, timeout=60).read()
    with open(out, "w") as f:
        json.dump({"modules": at_start, "after_request": sorted(sys.modules), "wav": [wav[:4].decode("latin-1"), len(wav)],
                   "voices": [v["id"] for v in voices["data"]], "page_has_low": 'value="low"' in page}, f)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=probe, daemon=True).start()
sys.exit(main(["serve", "--config", sys.argv[3], "--port", port, "--device", "cpu", "--log-level", "warning"]))
"""


def _free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def test_the_server_process_lists_the_voices_and_serves_audio_without_importing_a_stage_module_or_torch(tmp_path):
    out = tmp_path / "probe.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), _free_port(), str(PIPELINE)], env=omni_env(), capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(out.read_text())
    assert seen["voices"] == ["alloy", "low", "high"]  # VOICES of the entry stage's module, reported by its worker
    assert seen["page_has_low"]
    assert seen["wav"][0] == "RIFF" and seen["wav"][1] > 44  # a real result went through the parent's numpy path
    for when in ("modules", "after_request"):
        stage_modules = [m for m in seen[when] if m == "serving.stages" or m.startswith("omni_models")]
        assert stage_modules == [], when
        assert [m for m in seen[when] if m == "torch" or m.startswith("torch.")] == [], when
