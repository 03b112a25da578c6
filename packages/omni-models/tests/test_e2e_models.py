"""End-to-end synthesis of every model on the CPU, in its default topology and in one
split or regrouped topology, through the real runtime (spawned processes, the
production control plane, streaming to the client).

What a user relies on: the audio has the model's sample rate and channel count
(the package README's registered-models table), lasts about as long as the text asks for, is finite and
non-silent, longer text gives longer audio, and the runtime leaves no process
behind.
"""

from __future__ import annotations

from typing import Any

import psutil
import pytest
import torch
from e2e_support import MODEL_IDS, SPEC_BY_ID, compile_model, expected_seconds, load

from omni_compiler.splits import fraction_overrides
from omni_runtime import Runtime

SHORT = "Testing the pipeline end to end."
LONG = "Testing the pipeline end to end, now with a sentence that is clearly longer than the first."
TOPOLOGIES = ("default", "alternative")


def _topology(model_id: str, which: str) -> Any:
    if which == "default":
        return compile_model(model_id)
    overrides = list(SPEC_BY_ID[model_id].alt_overrides)
    return compile_model(model_id, overrides + fraction_overrides(load(model_id)))


def _check_audio(model_id: str, result: dict[str, Any], text: str) -> float:
    spec = SPEC_BY_ID[model_id]
    audio = result["audio"]
    assert int(result["sample_rate"]) == spec.sample_rate
    assert audio.dtype == torch.float32
    if spec.channels == 1:
        assert audio.dim() == 1, f"{model_id}: mono audio is [samples], got {tuple(audio.shape)}"
    else:
        assert audio.dim() == 2 and audio.shape[0] == spec.channels, f"{model_id}: expected [{spec.channels}, samples], got {tuple(audio.shape)}"
    assert torch.isfinite(audio).all()
    assert float(audio.abs().max()) <= 1.0
    assert float(audio.pow(2).mean().sqrt()) > 1e-3, f"{model_id}: the audio is silent"
    seconds = audio.shape[-1] / spec.sample_rate
    expected = expected_seconds(text)
    assert 0.5 * expected <= seconds <= 1.6 * expected + 0.5, f"{model_id}: {seconds:.2f} s for a text of about {expected:.2f} s"
    return seconds


@pytest.mark.timeout(300)
@pytest.mark.parametrize("which", TOPOLOGIES)
@pytest.mark.parametrize("model_id", [m for m in MODEL_IDS if m != "omni/espeak"])
def test_synthesis_on_cpu(model_id: str, which: str) -> None:
    topology = _topology(model_id, which)
    if which == "alternative":
        default = compile_model(model_id)
        assert {p.name: p.stages for p in topology.processes} != {p.name: p.stages for p in default.processes}
    with Runtime.running(topology, device="cpu", log=None, startup_timeout=240.0) as rt:
        pids = [pid for pid in rt.runtime.instance_pids().values() if pid is not None]
        assert len(pids) == len(topology.instances)
        short = rt.synthesize({"text": SHORT, "voice": None, "speed": 1.0, "stream": True}, timeout=240.0)
        long = rt.synthesize({"text": LONG, "voice": None, "speed": 1.0, "stream": True}, timeout=240.0)
        assert rt.health()["healthy"]
    short_s = _check_audio(model_id, short, SHORT)
    long_s = _check_audio(model_id, long, LONG)
    assert long_s > short_s * 1.5
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
