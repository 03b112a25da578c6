"""Overload refused at the request head, and slow-body floods that cannot lock out /health or new requests.

One real ``omni serve`` with ``--max-inflight 2``, a small connection cap and body and
header deadlines far longer than the clients wait, so what a test sees (a 429 before
any body byte, /health answering during a flood) can only come from the head check and
the eviction of the slowest body, not from a deadline passing.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path

import httpx
import pytest

from .conftest import assert_clean_exit, run_omni, shm_segments, start_server, wait_healthy
from .test_faults import HANG_GUARD_S, SPEECH_BODY, _dirs, _parked, _post, _wait_for

pytestmark = pytest.mark.timeout(300)
CAP = 40
LONG_S = 60
CLIENT_WAIT_S = 15


@pytest.fixture(scope="module")
def guarded_server():
    shm_before = shm_segments()
    server = start_server(
        "--max-inflight", "2", "--max-connections", str(CAP), "--body-timeout", str(LONG_S), "--header-timeout", str(LONG_S),
        "--log-level", "info",
    )
    try:
        wait_healthy(server.url)
        yield server
    finally:
        assert_clean_exit(server, shm_before)
        assert "Traceback" not in server.output, server.output[-4000:]
        assert "Too many open files" not in server.output


def _address(server) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _head(length: int) -> bytes:
    return (b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {length}\r\n\r\n".encode())


def _response(sock: socket.socket) -> bytes:
    sock.settimeout(CLIENT_WAIT_S)
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_max_inflight_has_a_bounded_default_stated_in_help():
    result = run_omni("serve", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    entry = text.split("--max-inflight N speech", 1)[1].split(" --", 1)[0]
    assert "429" in entry and "(default: 64)" in entry


@contextlib.contextmanager
def _two_held(server, tmp_path: Path):
    """Two requests held at the vocoder's gate (the --max-inflight 2 bound is reached); released on exit."""
    gate, markers = _dirs(tmp_path)
    results: dict = {}
    held = [_post(server, results, f"held{i}", input=f"held at the gate {i}", gate_dir=str(gate), marker_dir=str(markers)) for i in range(2)]
    try:
        _wait_for(lambda: _parked(markers, 2), "the two requests never reached the vocoder")
        yield results
    finally:
        (gate / "open").write_text("")
        for thread in held:
            thread.join(HANG_GUARD_S)


def test_over_the_bound_a_request_gets_429_from_its_head_alone(guarded_server, tmp_path: Path):
    with _two_held(guarded_server, tmp_path) as results:
        with socket.create_connection(_address(guarded_server)) as sock:
            sock.sendall(_head(1000))  # the head only: the 1000-byte body is never sent
            answer = _response(sock)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 429"), answer[:300]
        assert b"retry-after: 1" in head.lower()
        assert json.loads(body)["error"]["code"] == "overloaded"
        assert httpx.get(f"{guarded_server.url}/health", timeout=CLIENT_WAIT_S).status_code == 200
    assert [results[f"held{i}"].status_code for i in range(2)] == [200, 200]
    after = httpx.post(f"{guarded_server.url}/v1/audio/speech", json={**SPEECH_BODY, "input": "room again"}, timeout=HANG_GUARD_S)
    assert after.status_code == 200


def test_a_refused_request_keeps_its_connection_for_the_next_one(guarded_server, tmp_path: Path):
    with _two_held(guarded_server, tmp_path), httpx.Client(base_url=guarded_server.url, timeout=CLIENT_WAIT_S) as client:
        refused = client.post("/v1/audio/speech", json={**SPEECH_BODY, "input": "one too many"})
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert client.get("/health").status_code == 200  # same keep-alive connection: the unread body was discarded


def _metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def test_a_refusal_is_timed_from_its_head_and_the_loop_lag_is_exported(guarded_server, tmp_path: Path):
    before = httpx.get(f"{guarded_server.url}/metrics", timeout=CLIENT_WAIT_S).text
    with _two_held(guarded_server, tmp_path):
        refused = httpx.post(f"{guarded_server.url}/v1/audio/speech", json={**SPEECH_BODY, "input": "refused"}, timeout=CLIENT_WAIT_S)
        assert refused.status_code == 429
    after = httpx.get(f"{guarded_server.url}/metrics", timeout=CLIENT_WAIT_S).text
    for part in ("total", "queued"):
        name = f'omni_overload_refusal_seconds_count{{part="{part}"}}'
        assert _metric(after, name) == _metric(before, name) + 1, part
    total, queued = (_metric(after, f'omni_overload_refusal_seconds_sum{{part="{p}"}}') for p in ("total", "queued"))
    assert 0 <= queued <= total
    assert _metric(after, "omni_event_loop_lag_seconds_count") > _metric(before, "omni_event_loop_lag_seconds_count")


def test_workers_run_below_the_servers_cpu_priority(guarded_server):
    import psutil

    server_nice = psutil.Process(guarded_server.proc.pid).nice()
    workers = [p for p in psutil.Process(guarded_server.proc.pid).children(recursive=True) if "omni_runtime.worker" in " ".join(p.cmdline())]
    assert workers
    for worker in workers:  # every thread of a worker, the ones torch starts included
        assert {psutil.Process(worker.pid).nice()} | {os.getpriority(os.PRIO_PROCESS, t.id) for t in worker.threads()} == {min(19, server_nice + 10)}


def test_worker_nice_is_a_documented_serve_flag():
    result = run_omni("serve", "--help")
    entry = " ".join(result.stdout.split()).split("--worker-nice 0-19", 2)[2].split(" --", 1)[0]
    assert "(default: 10)" in entry and "429" in entry


def test_a_flood_of_trickling_bodies_at_the_connection_cap_leaves_health_and_requests_reachable(guarded_server):
    flood = []
    try:
        for _ in range(CAP * 2):
            sock = socket.create_connection(_address(guarded_server), timeout=CLIENT_WAIT_S)
            sock.sendall(_head(1000) + b"{")  # one byte of a 1000-byte body, then silence
            flood.append(sock)
        health = httpx.get(f"{guarded_server.url}/health", timeout=CLIENT_WAIT_S)
        assert health.status_code == 200
        speech = httpx.post(f"{guarded_server.url}/v1/audio/speech", json={**SPEECH_BODY, "input": "still served"}, timeout=HANG_GUARD_S)
        assert speech.status_code == 200 and speech.content[:4] == b"RIFF"
        # the slowest bodies were closed to make room: at least the flood's excess over the cap
        closed = 0
        for sock in flood:
            sock.settimeout(0.01)
            try:
                closed += sock.recv(1) == b""
            except TimeoutError:
                pass
            except ConnectionResetError:
                closed += 1
        assert closed >= CAP
    finally:
        for sock in flood:
            sock.close()


def test_a_body_nobody_reads_any_more_is_still_cut_at_the_body_deadline():
    """A request answered before its body (405 here, a 429 at the head alike) whose body never ends is closed."""
    shm_before = shm_segments()
    server = start_server("--body-timeout", "1", "--header-timeout", str(LONG_S), "--keep-alive-timeout", str(LONG_S))
    try:
        wait_healthy(server.url)
        with socket.create_connection(_address(server)) as sock:
            sock.sendall(b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            sock.settimeout(CLIENT_WAIT_S)
            data = b""
            while True:  # the 405, then the close (long before the 60 s head and keep-alive deadlines)
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    break
                except TimeoutError:
                    raise AssertionError(f"the connection was still open after {CLIENT_WAIT_S} s: {data[:200]!r}") from None
                if not chunk:
                    break
                data += chunk
        assert data.startswith(b"HTTP/1.1 405"), data[:200]
    finally:
        assert_clean_exit(server, shm_before)
