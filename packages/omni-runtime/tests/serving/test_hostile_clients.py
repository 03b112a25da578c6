"""Clients that try to stall or crash ``omni serve``: each case against a real server process.

The server runs with a lowered file-descriptor limit (512) and short header/body
timeouts, so the limits are exercised in seconds, as an attacker would hit them.
"""

from __future__ import annotations

import json
import resource
import socket
import time

import httpx
import pytest

from .conftest import assert_clean_exit, omni_command, omni_env, shm_segments, wait_healthy

pytestmark = pytest.mark.timeout(300)
FD_LIMIT = 512
TIMEOUT_S = 2


def _lower_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


@pytest.fixture(scope="module")
def hostile_server():
    import subprocess
    import threading

    from .conftest import PIPELINE, STARTUP_TIMEOUT_S, Server

    shm_before = shm_segments()
    proc = subprocess.Popen(
        omni_command(
            "serve", "--config", str(PIPELINE), "--port", "0", "--device", "cpu", "--log-level", "info",
            "--header-timeout", str(TIMEOUT_S), "--body-timeout", str(TIMEOUT_S),
        ),
        env=omni_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=_lower_fd_limit,
    )
    server = Server(proc)
    ready = threading.Event()

    def pump() -> None:
        for line in proc.stdout:
            server.lines.append(line)
            if line.startswith("omni: serving ") and " on http://" in line:
                server.url = line.split(" on ", 1)[1].split()[0]
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    assert ready.wait(STARTUP_TIMEOUT_S) and server.url, server.output
    server.children = server.stage_processes()
    wait_healthy(server.url)
    try:
        yield server
    finally:
        assert_clean_exit(server, shm_before)
        assert "Traceback" not in server.output, server.output[-4000:]


def _address(server) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _post(server, raw: bytes) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/audio/speech", content=raw, headers={"content-type": "application/json"}, timeout=30)


def _closed_within(sock: socket.socket, seconds: float) -> bytes:
    """Everything the server sends until it closes the connection (fails if it keeps it open)."""
    sock.settimeout(seconds)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise AssertionError(f"the server kept the connection open for {seconds} s") from None
        except ConnectionResetError:
            # the server closed while bytes we sent were still unread, so the kernel answers with a
            # reset: closed all the same
            return data
        if not chunk:
            return data
        data += chunk


def test_1000_idle_connections_do_not_lock_out_health_or_requests(hostile_server):
    idle = []
    try:
        for _ in range(1000):
            idle.append(socket.create_connection(_address(hostile_server), timeout=10))
        time.sleep(0.5)  # the server has accepted (and evicted) them by now
        started = time.monotonic()
        health = httpx.get(f"{hostile_server.url}/health", timeout=10)
        assert health.status_code == 200
        speech = httpx.post(f"{hostile_server.url}/v1/audio/speech", json={"input": "still here", "response_format": "pcm"}, timeout=30)
        assert speech.status_code == 200 and speech.content
        assert time.monotonic() - started < 30
    finally:
        for sock in idle:
            sock.close()


def test_headers_that_never_finish_are_closed(hostile_server):
    with socket.create_connection(_address(hostile_server)) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # no blank line: the head never ends
        assert _closed_within(sock, TIMEOUT_S + 8) == b""


def test_a_one_byte_per_second_body_is_cut_off(hostile_server):
    body = json.dumps({"input": "slow " * 20}).encode()
    with socket.create_connection(_address(hostile_server)) as sock:
        sock.sendall(
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
        )
        sent_until = time.monotonic() + TIMEOUT_S + 8
        answer = b""
        sock.settimeout(1.0)
        for byte in body:
            assert time.monotonic() < sent_until, "the server was still reading the trickle"
            try:
                sock.sendall(bytes([byte]))
                answer += sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if answer:
                break
        answer += _closed_within(sock, 10) if answer else b""
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b'"request_timeout"' in answer


def test_oversized_headers_are_a_431(hostile_server):
    response = httpx.get(f"{hostile_server.url}/health", headers={"X-Big": "a" * (1024 * 1024)}, timeout=30)
    assert response.status_code == 431
    assert response.json()["error"]["code"] == "request_header_fields_too_large"


def test_oversized_headers_arriving_in_one_piece_are_a_431(hostile_server):
    """A 100 KB head in a single segment is parsed whole by h11, past its incomplete-event bound."""
    with socket.create_connection(_address(hostile_server)) as sock:
        sock.settimeout(10)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n")
        answer = sock.recv(200)
    assert answer.startswith(b"HTTP/1.1 431 "), answer


def test_disconnect_mid_body_logs_one_line(hostile_server):
    before = len(hostile_server.lines)
    with socket.create_connection(_address(hostile_server)) as sock:
        sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"input\": ")
        time.sleep(0.3)
    deadline = time.monotonic() + 10
    while not any("disconnected after" in line for line in hostile_server.lines[before:]):
        assert time.monotonic() < deadline, "".join(hostile_server.lines[before:])
        time.sleep(0.1)
    new = "".join(hostile_server.lines[before:])
    assert new.count("disconnected after") == 1 and "Traceback" not in new


@pytest.mark.parametrize(
    ("raw", "code", "param"),
    [
        (b'{"input": "hi", "seed": ' + b"9" * 5000 + b"}", "invalid_json", None),
        (b'{"input": "hi", "x": ' + b"[" * 30000 + b"]" * 30000 + b"}", "invalid_json", None),
        (b'{"input": "\\ud800 lone"}', "invalid_unicode", "input"),
        (b'{"input": "hi", "extra": {"nested": "\\udfff"}}', "invalid_value", "extra"),
        (b'{"input": "hi", "my_field": ' + str(2**70).encode() + b"}", "invalid_value", "my_field"),
        (b'{"input": "hi", "speed": NaN}', "invalid_json", None),
        (b'{"input": "hi", "speed": 1e999}', "invalid_json", None),
        (b"\xff\xfe not utf-8", "invalid_json", None),
    ],
    ids=["5000-digit number", "30000-deep JSON", "lone surrogate", "surrogate in extra", "2**70 extra", "NaN", "overflow", "bad utf-8"],
)
def test_hostile_bodies_are_400s(hostile_server, raw, code, param):
    response = _post(hostile_server, raw)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"], error["type"]) == (code, param, "invalid_request_error")


def test_the_server_still_serves_after_the_abuse(hostile_server):
    response = httpx.post(f"{hostile_server.url}/v1/audio/speech", json={"input": "all good", "response_format": "wav"}, timeout=30)
    assert response.status_code == 200 and response.content[:4] == b"RIFF"
