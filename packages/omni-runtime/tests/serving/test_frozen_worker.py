"""``omni serve`` with a frozen worker: /health says ``restarting``, /metrics counts the restart, the server serves again."""

from __future__ import annotations

import os
import signal
import time

import httpx

from .conftest import assert_clean_exit, shm_segments, start_server, wait_healthy

GUARD_S = 90.0  # bounds the polls so a regression fails instead of hanging (not a timing assertion)


def _poll(url: str, want) -> dict:
    deadline = time.monotonic() + GUARD_S
    seen: list = []
    while time.monotonic() < deadline:
        live = httpx.get(f"{url}/v1/topology", timeout=10).json()["live"]
        health = httpx.get(f"{url}/health", timeout=10)
        state = {"live": live, "health": health.json(), "code": health.status_code}
        seen.append(state["health"])
        if want(state):
            return state
        time.sleep(0.05)
    raise AssertionError(f"never reached the wanted state; last: {seen[-3:]}")


def test_a_stopped_worker_is_restarting_in_health_then_serves_again():
    shm_before = shm_segments()
    server = start_server("--heartbeat-timeout", "3")
    try:
        wait_healthy(server.url)
        pid = httpx.get(f"{server.url}/v1/topology", timeout=10).json()["live"]["instances"]["vocoder"]["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            restarting = _poll(server.url, lambda s: s["health"]["processes"]["vocoder"] == "restarting")
        finally:
            try:
                os.kill(pid, signal.SIGCONT)  # it was killed; never leave one stopped if the test fails
            except ProcessLookupError:
                pass
        assert restarting["health"]["status"] == "restarting" and restarting["code"] == 503
        _poll(server.url, lambda s: s["health"]["status"] == "ready" and s["live"]["instances"]["vocoder"]["pid"] not in (None, pid))
        speech = httpx.post(f"{server.url}/v1/audio/speech", json={"model": "test/sine", "input": "Hello again."}, timeout=60)
        assert speech.status_code == 200
        metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
        assert 'omni_process_restarts_total{process="vocoder",reason="no heartbeat"} 1.0' in metrics
        assert "sent no heartbeat for" in server.output
    finally:
        assert_clean_exit(server, shm_before)
