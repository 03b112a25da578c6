"""The ``omni`` command line: synthesize, topology, startup and config failures, health on a dead worker."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time

import httpx
import numpy as np
import openai
import psutil
import pytest

from omni_compiler import cli as compile_cli
from omni_runtime import cli

from .conftest import (
    BROKEN_PIPELINE,
    MODEL_ID,
    PIPELINE,
    SAMPLE_RATE,
    SLOW_PIPELINE,
    omni_command,
    omni_env,
    run_omni,
    segments_of,
    shm_segments,
    start_server,
    wait_healthy,
)
from .stages import plan, tone

pytestmark = pytest.mark.timeout(300)


def _expected(text: str, voice: str | None = None, speed: float = 1.0) -> np.ndarray:
    freq, total = plan(text, voice, speed, SAMPLE_RATE)
    return np.rint(tone(freq, 0, total, SAMPLE_RATE).numpy() * 32767).astype(np.int16)


def _in_process(main, argv: list[str], capsys) -> tuple[int, str, str]:
    """Run a CLI ``main`` (what its console script calls) and capture its exit code and output."""
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_synthesize_writes_a_valid_wav(tmp_path):
    out = tmp_path / "out.wav"
    text = "Synthesize this sentence once."
    result = run_omni("synthesize", text, "-o", str(out), "--config", str(PIPELINE), "--device", "cpu", "--voice", "high", "--speed", "2")
    assert result.returncode == 0, result.stderr
    data = out.read_bytes()
    assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt "
    _, tag, channels, rate, byte_rate, align, bits = struct.unpack("<IHHIIHH", data[16:36])
    assert (tag, channels, rate, byte_rate, align, bits) == (1, 1, SAMPLE_RATE, SAMPLE_RATE * 2, 2, 16)
    (size,) = struct.unpack("<I", data[40:44])
    expected = _expected(text, "high", 2.0)
    assert size == 2 * len(expected) == len(data) - 44
    np.testing.assert_array_equal(np.frombuffer(data[44:], "<i2"), expected)
    assert f"wrote {out}" in result.stdout
    assert "frontend : frontend" in result.stderr  # the topology table is printed before spawning


def test_synthesize_to_stdout_keeps_the_audio_clean():
    """``-o -`` pipes raw audio; prints from stage processes must not end up inside it."""
    text = "NOISY stage, clean pipe."
    result = subprocess.run(
        omni_command("synthesize", text, "-o", "-", "--format", "pcm", "--config", str(PIPELINE)),
        env=omni_env(),
        capture_output=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr.decode()
    np.testing.assert_array_equal(np.frombuffer(result.stdout, "<i2"), _expected(text))
    assert b"chatty model code" in result.stderr


def test_synthesize_stage_failure_exits_2_with_the_stage_message(tmp_path):
    out = tmp_path / "out.wav"
    result = run_omni("synthesize", "FAIL_FRONTEND please", "-o", str(out), "--config", str(PIPELINE))
    assert result.returncode == 2
    assert "stage frontend (process frontend): ValueError: the frontend refuses this text" in result.stderr
    assert not out.exists()


def test_synthesize_empty_text_is_a_user_error(tmp_path, capsys):
    code, _, err = _in_process(cli.main, ["synthesize", "  ", "-o", str(tmp_path / "x.wav"), "--config", str(PIPELINE)], capsys)
    assert code == 1 and "the text is empty" in err


@pytest.mark.parametrize("command", [["synthesize", "hello", "-o", "unused.wav"], ["serve", "--port", "0"]])
def test_startup_failure_shows_stage_process_and_traceback(command, tmp_path):
    result = run_omni(*command, "--config", str(BROKEN_PIPELINE), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    err = result.stderr
    assert "stage vocoder (process vocoder)" in err
    assert "Traceback (most recent call last)" in err
    assert "cannot load weights for vocoder: /nonexistent/checkpoint is missing" in err
    assert not (tmp_path / "unused.wav").exists()


@pytest.mark.parametrize("extra", [["--processes.vocoder.num_replicas", "2"], ["--stages.vocoder.process", "frontend"]])
def test_topology_equals_omni_compile_show(extra, capsys):
    for fmt in ("text", "json"):
        ours = _in_process(cli.main, ["topology", "--config", str(PIPELINE), "--format", fmt, *extra], capsys)
        theirs = _in_process(compile_cli.main, ["show", str(PIPELINE), "--format", fmt, *extra], capsys)
        assert ours[0] == theirs[0] == 0, ours[2] + theirs[2]
        assert ours[1] == theirs[1] and ours[1].strip()


def test_topology_command_line_is_the_same_as_omni_compile():
    ours = run_omni("topology", "--config", str(PIPELINE))
    theirs = subprocess.run([sys.executable, "-m", "omni_compiler.cli", "show", str(PIPELINE)], capture_output=True, text=True, timeout=60)
    assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
    assert ours.stdout == theirs.stdout


def test_config_errors_exit_1_without_traceback():
    result = run_omni("topology", "--config", str(PIPELINE), "--stages.vocodr.process", "x")
    assert result.returncode == 1
    assert "stages.vocodr" in result.stderr and "did you mean 'vocoder'" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_config_error_is_reported_before_anything_starts(capsys):
    code, _, err = _in_process(cli.main, ["serve", "--config", str(PIPELINE), "--port", "0", "--stages.vocoder.procss", "x"], capsys)
    assert code == 1 and "stages.vocoder.procss" in err


def test_missing_config_file_is_a_user_mistake_exit_1(tmp_path, capsys):
    code, _, err = _in_process(cli.main, ["topology", "--config", str(tmp_path / "nope.yaml")], capsys)
    assert code == 1 and "nope.yaml" in err  # omni: 1 for every user mistake (README, exit codes)


def test_sigterm_during_startup_stops_everything(tmp_path):
    """``docker stop`` while a model loads: exit promptly, no stage process left running."""
    proc = subprocess.Popen(
        omni_command("serve", "--config", str(SLOW_PIPELINE), "--port", "0"),
        env=omni_env(SERVING_TEST_PID_DIR=str(tmp_path)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pid_file = tmp_path / "loader.pid"
        deadline = time.monotonic() + 120
        while not pid_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the loader stage never started"
            time.sleep(0.05)
        loader = psutil.Process(int(pid_file.read_text()))
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "omni: interrupted" in err and "Traceback" not in err
    assert "loader : loader" in out  # the table came first
    _gone, alive = psutil.wait_procs([loader], timeout=10)
    assert not alive, "the stage process outlived omni serve"


def test_port_in_use_is_a_user_error(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = _in_process(cli.main, ["serve", "--config", str(PIPELINE), "--port", str(port)], capsys)
    assert code == 1
    assert f"cannot listen on 127.0.0.1:{port}: address already in use" in err and "--port" in err


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_port_out_of_range_is_a_user_error(capsys, port):
    code, _, err = _in_process(cli.main, ["serve", "--config", str(PIPELINE), "--port", port], capsys)
    assert code == 1
    assert f"cannot listen on 127.0.0.1:{port}: a TCP port is 0..65535" in err and "Traceback" not in err


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("serve", "synthesize", "topology", "bench"):
        assert command in out
    assert "--stages.NAME.FIELD VALUE" in out and "omni/espeak" in out


def test_bench_without_its_module_says_so(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "omni_runtime.bench", None)  # import now fails as if not installed
    assert cli.main(["bench", "--requests", "3"]) == 2
    err = capsys.readouterr().err
    assert "omni bench is not available" in err and "omni_runtime.bench" in err


def test_killed_worker_turns_health_unhealthy_and_requests_fail_fast(tmp_path):
    """With restarts turned off (max_restarts: 0) a killed worker stays dead: fail fast, unhealthy."""
    before = shm_segments()
    server = start_server("--processes.vocoder.restart.max_restarts", "0", env={"SERVING_TEST_PID_DIR": str(tmp_path)})
    try:
        wait_healthy(server.url)
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)
        os.kill(int((tmp_path / "vocoder.pid").read_text()), signal.SIGKILL)
        deadline = time.monotonic() + 30
        while True:
            health = httpx.get(f"{server.url}/health", timeout=10)
            if health.status_code == 503:
                break
            assert time.monotonic() < deadline, "/health never turned unhealthy after SIGKILL of a worker"
            time.sleep(0.05)
        assert health.json()["status"] == "unhealthy"
        assert health.json()["processes"]["vocoder"] == "dead"
        with pytest.raises(openai.APIStatusError) as info:
            client.audio.speech.create(model=MODEL_ID, input="anyone there?", voice="alloy")
        assert info.value.status_code == 503
        assert info.value.response.headers["retry-after"] == "1"
        metrics = httpx.get(f"{server.url}/metrics").text
        assert "omni_runtime_healthy 0.0" in metrics
    finally:
        server.stop()
    _gone, alive = psutil.wait_procs(server.children, timeout=10)
    assert not alive
    assert not segments_of(shm_segments() - before, server.pids)
