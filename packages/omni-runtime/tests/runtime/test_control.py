"""Control messages that cannot be sent are logged once with request and peer, and counted for /metrics."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from omni_runtime import envelope as E
from omni_runtime.control import ControlSender
from omni_runtime.plane import Plane
from omni_runtime.serving.metrics import _SupervisionCollector
from omni_runtime.transport import RunDir

from .conftest import start_runtime
from .topologies import main_topology


def test_a_cancel_to_a_process_nobody_serves_is_logged_once_per_request_and_counted(tmp_path, caplog):
    async def scenario():
        run = RunDir.create(base=str(tmp_path))
        plane = Plane(run, E.PARENT, 1 << 20)
        try:
            control = ControlSender(timeout=0.2)
            control.attach(plane)
            with caplog.at_level(logging.WARNING, logger="omni.runtime"):
                sent = [
                    await control.send("ghost", E.header(E.CANCEL, rid="r1")),
                    await control.send("ghost", E.header(E.CANCEL, rid="r1")),
                    await control.send("ghost", E.header(E.CANCEL, rid="r2")),
                ]
            return sent, control.counts()
        finally:
            plane.close()
            run.cleanup()

    sent, counts = asyncio.run(scenario())
    assert sent == [False, False, False]
    assert counts == {("cancel", "ghost"): 3}
    lines = [r.getMessage() for r in caplog.records if "could not send" in r.getMessage()]
    assert len(lines) == 2  # once per (kind, peer, request)
    assert "cancel for request r1 to process ghost" in lines[0]
    assert "cancel for request r2 to process ghost" in lines[1]


def test_metrics_expose_failed_control_sends_by_kind_and_process():
    registry = CollectorRegistry()
    stats = {"restarts": {}, "ready_seconds": [], "control_failures": {("credit", "vocoder"): 2}}
    registry.register(_SupervisionCollector(lambda: stats))
    text = generate_latest(registry).decode()
    assert 'omni_control_send_failures_total{kind="credit",process="vocoder"} 2.0' in text


def test_a_credit_a_worker_cannot_send_to_a_peer_that_is_gone_reaches_metrics_with_its_heartbeat(loop_thread, tmp_path):
    """Real processes: ``back`` consumes a stream from ``front`` and returns credit to it. With front's
    endpoint gone (its socket file removed, so nobody can connect to it any more), every credit back
    fails in ``back``; the failures ride on back's heartbeat and the parent exports them by sending
    process, kind and peer."""
    rt = start_runtime(loop_thread, main_topology(), heartbeat_timeout=2.0)
    try:
        async def stream(n: int, marker_dir: Path):
            marker_dir.mkdir()
            handle = await rt.submit({"mode": "stream_src", "n": n, "marker_dir": str(marker_dir)})
            chunks = [chunk async for chunk in handle.stream()]
            return chunks, await handle.result()

        # first 3 chunks: under one credit batch, so back sends front nothing, while the parent's own connection to front is made
        assert loop_thread.run(stream(3, tmp_path / "warm"))[1]["order"] == [0, 1, 2]
        os.unlink(rt.run.address("front").removeprefix("ipc://"))  # the peer is gone for anyone not yet connected
        chunks, result = loop_thread.run(stream(8, tmp_path / "gone"))
        assert result["order"] == list(range(8)) and len(chunks) == 8  # credit goes back every 4 chunks; 8 fit the window of 16

        deadline = time.monotonic() + 30  # a worker's control send gives up after 5 s, then the next beat reports it
        while time.monotonic() < deadline and not rt.supervision()["worker_control_failures"]:
            time.sleep(0.2)
        reported = rt.supervision()["worker_control_failures"]
        assert reported.get(("back", "credit", "front"), 0) >= 1, reported
        registry = CollectorRegistry()
        registry.register(_SupervisionCollector(rt.supervision))
        text = generate_latest(registry).decode()
        assert 'omni_worker_control_send_failures_total{kind="credit",peer="front",process="back"}' in text
    finally:
        loop_thread.run(rt.shutdown(grace=5.0))
