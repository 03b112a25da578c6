"""Fixtures that run the real ``omni`` CLI in subprocesses against the test stages.

The server under test is ``omni serve`` itself (``python -m omni_runtime.cli``),
with the runtime spawning real stage processes; the test stages are found
through PYTHONPATH exactly as a user's own stage package would be.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

HERE = Path(__file__).resolve().parent
TESTS_DIR = HERE.parent
PIPELINE = HERE / "pipeline.yaml"
BROKEN_PIPELINE = HERE / "pipeline_broken.yaml"
SLOW_PIPELINE = HERE / "pipeline_slow_start.yaml"
MODEL_ID = "test/sine"
SAMPLE_RATE = 16000
STARTUP_TIMEOUT_S = 120.0


def omni_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "omni_runtime.cli", *args]


def omni_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS_DIR), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_omni(*args: str, timeout: float = 180.0, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(omni_command(*args), env=omni_env(), capture_output=True, text=True, timeout=timeout, cwd=cwd)


def shm_segments() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except FileNotFoundError:
        return set()


def segments_of(names: set[str], pids: set[int]) -> set[str]:
    """The omni segments among ``names`` created by ``pids`` (named ``omni-<run>-<pid>-<seq>``).

    Other test sessions may be creating their own segments at the same time;
    only the server's own process tree is checked.
    """
    owned = set()
    for name in names:
        parts = name.split("-")
        if len(parts) >= 4 and parts[0] == "omni" and parts[-2].isdigit() and int(parts[-2]) in pids:
            owned.add(name)
    return owned


@dataclass
class Server:
    """A running ``omni serve`` subprocess."""

    proc: subprocess.Popen[str]
    url: str = ""
    lines: list[str] = field(default_factory=list)
    children: list[psutil.Process] = field(default_factory=list)

    @property
    def pids(self) -> set[int]:
        return {self.proc.pid, *(child.pid for child in self.children)}

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def stage_processes(self) -> list[psutil.Process]:
        return psutil.Process(self.proc.pid).children(recursive=True)

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"omni serve did not stop within {timeout}s after SIGTERM:\n{self.output}") from None


def start_server(*extra: str, config: Path = PIPELINE, env: dict[str, str] | None = None) -> Server:
    proc = subprocess.Popen(
        omni_command("serve", "--config", str(config), "--port", "0", "--device", "cpu", "--log-level", "warning", *extra),
        env=omni_env(**(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    server = Server(proc)
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            server.lines.append(line)
            if line.startswith("omni: serving ") and " on http://" in line:
                server.url = line.split(" on ", 1)[1].split()[0]
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(STARTUP_TIMEOUT_S) or not server.url:
        server.stop(timeout=10)
        raise AssertionError(f"omni serve did not come up:\n{server.output}")
    server.children = server.stage_processes()
    return server


def wait_healthy(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url}/health never turned healthy")


def assert_clean_exit(server: Server, shm_before: set[str]) -> None:
    code = server.stop()
    assert code == 0, f"omni serve exited {code}:\n{server.output}"
    _gone, alive = psutil.wait_procs(server.children, timeout=10)
    assert not alive, f"stage processes left behind: {alive}"
    leaked = segments_of(shm_segments() - shm_before, server.pids)
    assert not leaked, f"/dev/shm segments left behind: {sorted(leaked)}"


@pytest.fixture(scope="module")
def server():
    """One ``omni serve`` for a module's tests; it must shut down cleanly afterwards."""
    shm_before = shm_segments()
    running = start_server()
    try:
        wait_healthy(running.url)
        yield running
    finally:
        assert_clean_exit(running, shm_before)
