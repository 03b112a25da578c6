"""A TP=2 engine on the Ray backend: a two-node Ray cluster on 127.0.0.1, the ranks packed on one node.

Higgs-TTS with ``tts_engine`` at ``tp_size: 2``: its two ranks are one ``STRICT_PACK`` placement
group pinned to the worker node; rank 0's actor picks the rendezvous port on that node. Greedy
requests give the same audio as TP=1 on the local backend, alone and in a batch, so the same codes.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from importlib import resources

import pytest
import torch

from omni_compiler import compile as compile_topology
from omni_config.loader import load_config
from omni_runtime import Runtime
from omni_runtime.testing.ranks import hold_connection

TEXTS = ("Hello there.", "A second, slightly longer sentence for the batch.")


def _item(text: str) -> dict:
    return {"text": text, "voice": None, "speed": 1.0, "stream": True, "temperature": 0.0}


@pytest.fixture(scope="module")
def two_nodes():
    from omni_runtime.raycluster.local import local_cluster

    with local_cluster({"node_a": {"node_a": 4}}, head_cpus=2) as local:
        yield local


def _deployment(tmp_path, tp: int):
    path = tmp_path / f"tp{tp}.yaml"
    higgs = resources.files("omni_models.higgs_tts") / "pipeline.yaml"
    path.write_text(
        f"extends: {higgs}\n"
        # fifo: the deadline scheduler sizes a stream's chunks by its playback clock, so chunk joins (and
        # the last float bits of the audio) follow timing; fifo keeps them fixed, so TP=2 audio equals TP=1 exactly
        f"stages:\n  - {{name: tts_engine, tp_size: {tp}, gpu: {[0, 1] if tp > 1 else 0}, factory_args: {{scheduler: fifo}}}}\n"
        "processes:\n  pipeline:\n    ray: {resources: {node_a: 1}}\n"
    )
    return compile_topology(load_config(path))


def _synthesize_all(rt) -> tuple[list, list]:
    alone = [rt.synthesize(_item(t), timeout=300.0)["audio"] for t in TEXTS]
    batch: list = [None] * len(TEXTS)

    def one(i: int) -> None:
        batch[i] = rt.synthesize(_item(TEXTS[i]), timeout=300.0)["audio"]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(TEXTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return alone, batch


@pytest.mark.timeout(900)
def test_tp2_on_ray_packs_the_ranks_on_one_node_gives_tp1_audio_and_restarts_as_a_group(two_nodes, tmp_path):
    with Runtime.running(_deployment(tmp_path, 1), device="cpu", log=None, startup_timeout=300.0) as rt:
        reference = [rt.synthesize(_item(t), timeout=300.0)["audio"] for t in TEXTS]
    topology = _deployment(tmp_path, 2)
    with Runtime.running(topology, device="cpu", log=None, startup_timeout=300.0, backend="ray", ray_address=two_nodes.address) as rt:
        placements = rt._call(rt.runtime.placements())
        node_a = two_nodes.node_id("node_a")
        assert placements["pipeline_tp0"]["node_id"] == placements["pipeline_tp1"]["node_id"] == node_a
        assert hold_connection(placements["pipeline_tp0"]["pid"], placements["pipeline_tp1"]["pid"])  # the ranks formed their process group
        group = rt.health()["tp_groups"]["tts_engine"]
        assert group["state"] == "ready" and [r["instance"] for r in group["ranks"]] == ["pipeline_tp0", "pipeline_tp1"]
        alone, batch = _synthesize_all(rt)
        for ref, one, many in zip(reference, alone, batch):
            assert torch.equal(one, ref)
            assert torch.equal(many, ref)

        # one rank's process dies: the group restarts as one unit (rank 0's actor picks a new port) and serves again
        os.kill(placements["pipeline_tp1"]["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and rt.health()["tp_groups"]["tts_engine"]["state"] == "ready":
            time.sleep(0.1)  # until the supervisor saw the death
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not rt.health()["healthy"]:
            time.sleep(0.5)
        assert rt.health()["tp_groups"]["tts_engine"]["state"] == "ready", rt.health()
        again = rt._call(rt.runtime.placements())
        assert again["pipeline_tp0"]["pid"] != placements["pipeline_tp0"]["pid"] and again["pipeline_tp1"]["pid"] != placements["pipeline_tp1"]["pid"]
        assert again["pipeline_tp0"]["node_id"] == again["pipeline_tp1"]["node_id"] == node_a
        assert hold_connection(again["pipeline_tp0"]["pid"], again["pipeline_tp1"]["pid"])
        assert torch.equal(rt.synthesize(_item(TEXTS[0]), timeout=300.0)["audio"], reference[0])
