"""A TP=2 engine under the real runtime (local backend): same audio as TP=1, a rank that never joins,
and a killed rank that takes its group down and back up as one unit.

Higgs-TTS's ``tts_engine`` with ``tp_size: 2`` runs as ``pipeline_tp0`` and ``pipeline_tp1``; the
ranks rendezvous at start-up, hold half of the blocks each, and rank 0 schedules for both.
Greedy requests (``temperature: 0``) make the audio a function of the codes alone, so equal audio
from TP=1 and TP=2 means equal codes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from importlib import resources

import pytest
import torch

from omni_compiler import compile as compile_topology
from omni_config.loader import load_config
from omni_runtime import Runtime
from omni_runtime.errors import RequestFailed, StartupError
from omni_runtime.launch import LocalBackend
from omni_runtime.launch.local import LocalWorker
from omni_runtime.testing.ranks import hold_connection

TEXTS = ("Hello there.", "A second, slightly longer sentence for the batch.", "Third one here.")
LONG = "This request is long enough to be still generating when one rank of the engine is killed. " * 3


def _topology(tp: int):
    """Higgs-TTS at ``tp``, under the fifo scheduler: the deadline scheduler sizes a stream's chunks
    by its playback clock (wall time), and the codec rounds differently (~1e-8) at other chunk
    boundaries, so batched audio would equal the reference only up to that, whatever the TP size."""
    path = str(resources.files("omni_models.higgs_tts") / "pipeline.yaml")
    overrides = ["--stages.tts_engine.factory_args.scheduler", "fifo"]
    overrides += ["--stages.tts_engine.tp_size", str(tp), "--stages.tts_engine.gpu", "0,1"] if tp > 1 else []
    return compile_topology(load_config(path, overrides))


def _item(text: str) -> dict:
    return {"text": text, "voice": None, "speed": 1.0, "stream": True, "temperature": 0.0}


@pytest.fixture(scope="module")
def reference() -> list[torch.Tensor]:
    with Runtime.running(_topology(1), device="cpu", log=None, startup_timeout=240.0) as rt:
        return [rt.synthesize(_item(t), timeout=240.0)["audio"] for t in TEXTS]


def _together(rt, items: list[dict]) -> list:
    """Synthesize concurrently (so the engine batches them): each audio, or the RequestFailed."""
    out: list = [None] * len(items)

    def one(i: int) -> None:
        try:
            out[i] = rt.synthesize(items[i], timeout=240.0)
        except RequestFailed as exc:
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def _wait_ready(rt, timeout: float = 180.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        health = rt.health()
        if health["healthy"]:
            return health
        time.sleep(0.2)
    raise AssertionError(f"not ready again within {timeout:g} s: {rt.health()}")


@pytest.mark.timeout(600)
def test_tp2_same_audio_alone_and_in_a_batch_then_a_killed_rank_restarts_its_group(reference):
    with Runtime.running(_topology(2), device="cpu", log=None, startup_timeout=240.0) as rt:
        group = rt.health()["tp_groups"]["tts_engine"]
        assert [r["instance"] for r in group["ranks"]] == ["pipeline_tp0", "pipeline_tp1"] and group["state"] == "ready"
        pids = rt.runtime.instance_pids()
        assert hold_connection(pids["pipeline_tp0"], pids["pipeline_tp1"])  # the ranks formed their process group
        alone = [rt.synthesize(_item(t), timeout=240.0)["audio"] for t in TEXTS]
        batch = _together(rt, [_item(t) for t in TEXTS])
        for ref, one, many in zip(reference, alone, batch):
            assert not isinstance(many, RequestFailed), many
            assert torch.equal(one, ref)
            assert torch.equal(many["audio"], ref)

        pids = rt.runtime.instance_pids()
        outcome: dict = {}
        worker = threading.Thread(target=lambda: outcome.update(r=_together(rt, [_item(LONG)])[0]))
        worker.start()
        time.sleep(1.5)  # the request is generating
        os.kill(pids["pipeline_tp1"], signal.SIGKILL)
        worker.join(timeout=120)
        failed = outcome["r"]
        assert isinstance(failed, RequestFailed) and failed.kind == "process_died", failed
        assert "pipeline_tp1" in str(failed)
        health = _wait_ready(rt)
        after = rt.runtime.instance_pids()
        assert after["pipeline_tp0"] != pids["pipeline_tp0"] and after["pipeline_tp1"] != pids["pipeline_tp1"]  # the group restarted as one
        assert after["vocoder"] == pids["vocoder"] and after["tts_frontend"] == pids["tts_frontend"]
        assert health["tp_groups"]["tts_engine"]["state"] == "ready"
        assert torch.equal(rt.synthesize(_item(TEXTS[0]), timeout=240.0)["audio"], reference[0])  # service is back, same codes


class RankOneNeverJoins(LocalBackend):
    """Rank 1 of the engine's group is a real process that never joins (it sleeps)."""

    async def launch(self, launch):
        if launch.instance != "pipeline_tp1":
            return await super().launch(launch)
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        worker = LocalWorker(launch.instance, proc, asyncio.get_running_loop())
        self.workers.append(worker)
        return worker


@pytest.mark.timeout(300)
def test_a_rank_that_never_joins_fails_startup_within_the_ready_timeout_naming_group_and_rank():
    start = time.monotonic()
    with pytest.raises(StartupError) as caught, Runtime.running(_topology(2), device="cpu", log=None, startup_timeout=45.0, backend=RankOneNeverJoins()):
        pass
    message = str(caught.value)
    assert "TP group tts_engine rank 0 of 2" in message and "rank(s) 1 did not join" in message, message
    assert time.monotonic() - start < 45.0 + 20.0
