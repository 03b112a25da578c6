"""``omni serve`` through faults and stops, with real processes: 429 at the in-flight bound, a
killed worker (503 process_died, then the restarted one serves), SIGTERM to the whole process
group (drain, then 503 shutdown), Ctrl-C without tracebacks, and the log lines an operator reads."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import httpx

from .conftest import MODEL_ID, Server, assert_clean_exit, shm_segments, start_server, wait_healthy

SPEECH_BODY = {"model": MODEL_ID, "voice": "alloy", "response_format": "wav"}
HANG_GUARD_S = 60.0


def _post(server: Server, results: dict, key: str, **fields) -> threading.Thread:
    """POST /v1/audio/speech in a thread; the response lands in ``results[key]``."""

    def run() -> None:
        try:
            results[key] = httpx.post(f"{server.url}/v1/audio/speech", json={**SPEECH_BODY, **fields}, timeout=HANG_GUARD_S)
        except httpx.HTTPError as exc:
            results[key] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _wait_for(predicate, what: str, seconds: float = HANG_GUARD_S) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _parked(markers: Path, count: int) -> bool:
    return len(list(markers.glob("*.waiting"))) >= count


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    gate, markers = tmp_path / "gate", tmp_path / "markers"
    gate.mkdir()
    markers.mkdir()
    return gate, markers


def _json_lines(server: Server) -> list[dict]:
    out = []
    for line in server.output.splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def test_max_inflight_answers_429_at_once(tmp_path: Path):
    shm_before = shm_segments()
    gate, markers = _dirs(tmp_path)
    server = start_server("--max-inflight", "1")
    try:
        wait_healthy(server.url)
        results: dict = {}
        first = _post(server, results, "first", input="held at the gate", gate_dir=str(gate), marker_dir=str(markers))
        _wait_for(lambda: _parked(markers, 1), "the first request never reached the vocoder")
        began = time.monotonic()
        refused = httpx.post(f"{server.url}/v1/audio/speech", json={**SPEECH_BODY, "input": "one too many"}, timeout=HANG_GUARD_S)
        refused_after = time.monotonic() - began
        (gate / "open").write_text("")
        first.join(HANG_GUARD_S)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "overloaded"
        assert refused_after < HANG_GUARD_S  # answered, not queued behind the held request
        assert results["first"].status_code == 200
        after = httpx.post(f"{server.url}/v1/audio/speech", json={**SPEECH_BODY, "input": "room again"}, timeout=HANG_GUARD_S)
        assert after.status_code == 200
    finally:
        assert_clean_exit(server, shm_before)


def test_group_sigterm_drains_in_flight_requests_and_refuses_new_ones_with_503_shutdown(tmp_path: Path):
    shm_before = shm_segments()
    gate, markers = _dirs(tmp_path)
    server = start_server("--shutdown-grace", "30", "--log-level", "info")
    wait_healthy(server.url)
    children = server.stage_processes()
    results: dict = {}
    threads = [_post(server, results, f"r{i}", input=f"in flight {i}", gate_dir=str(gate), marker_dir=str(markers)) for i in range(2)]
    _wait_for(lambda: _parked(markers, 2), "the requests never reached the vocoder")
    # systemd's KillMode=control-group and `docker stop` of a shell-run server: every process gets SIGTERM
    os.killpg(server.proc.pid, signal.SIGTERM)
    _wait_for(lambda: "draining" in server.output, "the server never said it drains")
    late = httpx.post(f"{server.url}/v1/audio/speech", json={**SPEECH_BODY, "input": "too late"}, timeout=HANG_GUARD_S)
    (gate / "open").write_text("")
    for thread in threads:
        thread.join(HANG_GUARD_S)
    assert late.status_code == 503
    assert late.json()["error"]["code"] == "shutdown"
    assert [results[f"r{i}"].status_code for i in range(2)] == [200, 200], server.output
    assert server.proc.wait(timeout=HANG_GUARD_S) == 0, server.output
    assert "Traceback" not in server.output
    for child in children:
        assert not child.is_running() or child.status() == "zombie"
    assert not {n for n in shm_segments() - shm_before if n.startswith("omni-")}


def test_requests_still_running_after_the_grace_get_503_shutdown_in_json(tmp_path: Path):
    gate, markers = _dirs(tmp_path)
    server = start_server("--shutdown-grace", "1")
    wait_healthy(server.url)
    results: dict = {}
    thread = _post(server, results, "held", input="never released", gate_dir=str(gate), marker_dir=str(markers))
    _wait_for(lambda: _parked(markers, 1), "the request never reached the vocoder")
    os.killpg(server.proc.pid, signal.SIGTERM)
    thread.join(HANG_GUARD_S)
    response = results["held"]
    assert response.status_code == 503, server.output
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == "shutdown"
    assert server.proc.wait(timeout=HANG_GUARD_S) == 0, server.output


def test_ctrl_c_stops_the_server_without_tracebacks():
    shm_before = shm_segments()
    server = start_server()
    wait_healthy(server.url)
    assert httpx.post(f"{server.url}/v1/audio/speech", json={**SPEECH_BODY, "input": "hello"}, timeout=HANG_GUARD_S).status_code == 200
    os.killpg(server.proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    assert server.proc.wait(timeout=HANG_GUARD_S) == 0, server.output
    assert "Traceback" not in server.output and "KeyboardInterrupt" not in server.output, server.output
    assert_clean_exit(server, shm_before)


def test_logs_and_a_killed_worker_answered_with_503_then_served_by_its_restart(tmp_path: Path):
    shm_before = shm_segments()
    gate, markers = _dirs(tmp_path)
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    server = start_server("--log-format", "json", "--log-level", "info", env={"SERVING_TEST_PID_DIR": str(pid_dir)})
    try:
        wait_healthy(server.url)
        ok = httpx.post(f"{server.url}/v1/audio/speech", json={**SPEECH_BODY, "input": "NOISY but fine"}, timeout=HANG_GUARD_S)
        failed = httpx.post(f"{server.url}/v1/audio/speech", json={**SPEECH_BODY, "input": "FAIL_VOCODER now"}, timeout=HANG_GUARD_S)
        assert (ok.status_code, failed.status_code) == (200, 500)

        # a worker killed mid-request: that request fails at once, retryably
        results: dict = {}
        thread = _post(server, results, "held", input="in flight when killed", gate_dir=str(gate), marker_dir=str(markers))
        _wait_for(lambda: _parked(markers, 1), "the request never reached the vocoder")
        old_pid = int((pid_dir / "vocoder.pid").read_text())
        os.kill(old_pid, signal.SIGKILL)
        thread.join(HANG_GUARD_S)
        died = results["held"]
        assert died.status_code == 503
        assert died.headers["retry-after"] == "1"
        assert died.json()["error"]["code"] == "process_died"
        # the supervisor restarts it; the next request is served by the new process
        _wait_for(lambda: int((pid_dir / "vocoder.pid").read_text()) != old_pid, "the vocoder was never restarted")
        wait_healthy(server.url, timeout=HANG_GUARD_S)
        health = httpx.get(f"{server.url}/health").json()
        assert (health["status"], health["processes"]) == ("ready", {"frontend": "ready", "vocoder": "ready"})
        again = httpx.post(f"{server.url}/v1/audio/speech", json={**SPEECH_BODY, "input": "after the restart"}, timeout=HANG_GUARD_S)
        assert again.status_code == 200
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'omni_process_restarts_total{process="vocoder",reason="SIGKILL"} 1.0' in metrics
        assert 'omni_process_time_to_ready_seconds{process="vocoder"}' in metrics
    finally:
        assert_clean_exit(server, shm_before)

    records = _json_lines(server)
    assert records, server.output
    for record in records:
        assert {"time", "level", "instance", "stage", "message"} <= set(record), record
    # model code printing to stdout reaches the server log under its instance's name
    assert any(r["instance"] == "frontend" and "chatty model code" in r["message"] for r in records)
    # a stage error: its traceback once, at error level, from the instance and stage where it happened
    errors = [r for r in records if "vocoder exploded on purpose" in r.get("traceback", "")]
    assert len(errors) == 1, errors
    assert (errors[0]["level"], errors[0]["instance"], errors[0]["stage"]) == ("error", "vocoder", "vocoder")
    # one access line per request, with status, time, model, characters and audio seconds
    access = [r for r in records if r["logger"] == "omni.access"]
    assert [a["status"] for a in access] == [200, 500, 503, 200]
    assert access[0]["model"] == MODEL_ID and access[0]["chars"] == len("NOISY but fine") and access[0]["audio_s"] > 0
    assert all(isinstance(a["seconds"], float) for a in access)
    # the restart: its reason and its time to ready
    assert any(r["level"] == "warning" and "vocoder was killed by SIGKILL; restarting it" in r["message"] for r in records)
    assert any("vocoder ready again after restart 1" in r["message"] for r in records)


