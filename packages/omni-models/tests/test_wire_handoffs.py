"""Wire contracts of Voxtral and Ming: their guarded handoffs survive a real process boundary.

The spec: Voxtral carries input_ids, voice and generation limits in
StagePayload.data before tts_generation; Ming does the same for its
preprocessing fields, then serialises spk_emb and prompt_latent as typed tensors
before tts_engine. "The unit suite verifies those wire contracts in separate
spawned workers through the production control plane and SHM relay. The model
configs still reject these splits."

Each test runs the model twice through the real runtime: once in its default
topology (the handoff passes the object in-process) and once with the guarded
stages in different spawned processes (a copy of the model config without the
guard entries; the shipped config keeps them, which is asserted too). A probe
around each receiving stage records, inside the receiving process, exactly the
payload that arrived; the two recordings must match field for field, tensors
bit for bit with their dtype and shape, and so must the audio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from e2e_support import load, read_recording, with_probes, without_guards

from omni_compiler import TopologyError
from omni_compiler import compile as compile_topology
from omni_runtime import Runtime
from omni_runtime.testing import LeakCheck, shm_entries

# Each test starts two runtimes (spawned workers importing torch): allow for a loaded machine.
pytestmark = pytest.mark.timeout(300)

VOXTRAL = "mistralai/voxtral-tts"
MING = "inclusionai/ming-omni-tts"


@pytest.fixture
def no_leaks():
    """No child process and none of these runs' shared-memory segments outlive the test.

    Only segments under the runs' own prefixes count: other test sessions on the
    same machine create and remove their own segments meanwhile.
    """
    prefixes: list[str] = []
    check = LeakCheck.start(ignore_shm=".*")
    yield prefixes
    check.assert_clean(wait=10.0)
    assert prefixes, "the test started no runtime"
    left = sorted(name for name in shm_entries() if any(name.startswith(p) for p in prefixes))
    assert not left, f"leaked /dev/shm segments: {left}"


def _run(config: Any, data: dict[str, Any], prefixes: list[str]) -> tuple[dict[str, Any], dict[str, int | None], tuple[str, ...]]:
    topology = compile_topology(config)
    with Runtime.running(topology, device="cpu", log=None, startup_timeout=180.0) as rt:
        prefixes.append(rt.runtime.run.shm_prefix)
        pids = rt.runtime.instance_pids()
        result = rt.synthesize(data, timeout=180.0)
    return result, pids, tuple(i.name for i in topology.instances)


def _assert_same_payload(left_dir: Path, right_dir: Path, name: str) -> dict[str, torch.Tensor]:
    left_tree, left_tensors = read_recording(left_dir, name)
    right_tree, right_tensors = read_recording(right_dir, name)
    assert right_tree == left_tree, f"{name}: payload fields differ across the process boundary"
    assert right_tensors.keys() == left_tensors.keys()
    for key, expected in left_tensors.items():
        got = right_tensors[key]
        assert (got.dtype, tuple(got.shape)) == (expected.dtype, tuple(expected.shape)), key
        assert torch.equal(got.view(torch.uint8), expected.view(torch.uint8)), f"{key}: bytes differ"
    return left_tensors


def _received_pid(directory: Path, stage: str) -> int:
    return int((directory / f"{stage}-received.pid").read_text())


def test_model_configs_still_reject_the_guarded_splits() -> None:
    with pytest.raises(TopologyError) as voxtral:
        compile_topology(load(VOXTRAL, ["--stages.tts_generation.process", "generation"]))
    assert "the edge preprocessing -> tts_generation must stay inside one OS process" in voxtral.value.render()
    with pytest.raises(TopologyError) as ming:
        compile_topology(load(MING, ["--stages.reference_encode.process", "reference", "--stages.tts_engine.process", "engine"]))
    rendered = ming.value.render()
    assert "the edge preprocessing -> reference_encode must stay inside one OS process" in rendered
    assert "the edge reference_encode -> tts_engine must stay inside one OS process" in rendered


def test_voxtral_payload_crosses_spawned_workers_intact(tmp_path: Path, no_leaks: list[str]) -> None:
    data = {"text": "Wire contract check for Voxtral.", "voice": "nova", "speed": 1.25, "seed": 7, "stream": False}
    probes = ("tts_generation", "vocoder")
    local_dir, split_dir = tmp_path / "local", tmp_path / "split"

    local = with_probes(load(VOXTRAL), probes, local_dir)
    split = load(VOXTRAL, ["--stages.tts_generation.process", "generation", "--stages.vocoder.process", "generation"])
    split = with_probes(without_guards(split, [("preprocessing", "tts_generation")]), probes, split_dir)

    local_result, local_pids, local_instances = _run(local, data, no_leaks)
    split_result, split_pids, split_instances = _run(split, data, no_leaks)

    assert local_instances == ("pipeline",)
    assert split_instances == ("pipeline", "generation")
    assert _received_pid(local_dir, "tts_generation") == local_pids["pipeline"]
    assert _received_pid(split_dir, "tts_generation") == split_pids["generation"] != split_pids["pipeline"]

    _assert_same_payload(local_dir, split_dir, "tts_generation-received")
    tree, _ = read_recording(split_dir, "tts_generation-received")
    for field in ("input_ids", "voice", "generation_limits"):
        assert field in tree, f"Voxtral's preprocessing must carry {field} in StagePayload.data"
    codes = _assert_same_payload(local_dir, split_dir, "vocoder-received")
    assert codes, "tts_generation -> vocoder carries the codes as a tensor"
    assert torch.equal(split_result["audio"], local_result["audio"])
    assert split_result["sample_rate"] == local_result["sample_rate"] == 24_000


def test_ming_tensors_cross_spawned_workers_bit_exact(tmp_path: Path, no_leaks: list[str]) -> None:
    generator = torch.Generator().manual_seed(11)
    # 8 s at 44.1 kHz: the reference wave (1.4 MB) goes through the shared-memory relay,
    # spk_emb and prompt_latent travel inline: both transport paths are exercised.
    ref_audio = 0.3 * torch.randn(8 * 44_100, generator=generator)
    data = {"text": "Wire contract check for Ming.", "voice": None, "ref_audio": ref_audio, "ref_sample_rate": 44_100, "stream": True}
    probes = ("reference_encode", "tts_engine")
    local_dir, split_dir = tmp_path / "local", tmp_path / "split"

    local = with_probes(load(MING), probes, local_dir)
    # Two processes cross both guarded edges: preprocessing -> [reference] -> tts_engine.
    split = load(MING, ["--stages.reference_encode.process", "reference"])
    guards = [("preprocessing", "reference_encode"), ("reference_encode", "tts_engine")]
    split = with_probes(without_guards(split, guards), probes, split_dir)

    local_result, local_pids, _ = _run(local, data, no_leaks)
    split_result, split_pids, split_instances = _run(split, data, no_leaks)

    assert split_instances == ("pipeline", "reference")
    assert _received_pid(local_dir, "reference_encode") == _received_pid(local_dir, "tts_engine") == local_pids["pipeline"]
    assert _received_pid(split_dir, "reference_encode") == split_pids["reference"]
    assert _received_pid(split_dir, "tts_engine") == split_pids["pipeline"] != split_pids["reference"]

    at_reference = _assert_same_payload(local_dir, split_dir, "reference_encode-received")
    ref_wave = next(t for k, t in at_reference.items() if k.endswith("ref_wave"))
    assert ref_wave.nbytes >= 1 << 20, "the reference wave must be large enough to take the SHM path"
    at_engine = _assert_same_payload(local_dir, split_dir, "tts_engine-received")
    spk_emb = next(t for k, t in at_engine.items() if k.endswith("spk_emb"))
    prompt_latent = next(t for k, t in at_engine.items() if k.endswith("prompt_latent"))
    assert spk_emb.dtype == prompt_latent.dtype == torch.float32
    assert spk_emb.dim() == 1 and prompt_latent.dim() == 2 and prompt_latent.shape[1] > 0
    assert torch.equal(split_result["audio"], local_result["audio"])
    assert split_result["sample_rate"] == 44_100
