"""Control messages that cannot be sent are logged once with request and peer, and counted for /metrics."""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry, generate_latest

from omni_runtime import envelope as E
from omni_runtime.control import ControlSender
from omni_runtime.plane import Plane
from omni_runtime.serving.metrics import _SupervisionCollector
from omni_runtime.transport import RunDir


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
