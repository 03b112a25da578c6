"""The compiled topology is pure, frozen and survives a JSON round trip unchanged."""

from __future__ import annotations

import dataclasses
import json

import pytest
from compiler_helpers import FIXTURES, compiled

from omni_compiler import CompiledTopology, compile, compile_file
from omni_config import raw_config


def _variants(higgs):
    return {
        "plain": compiled(higgs),
        "tp": compiled(higgs, ["--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1"]),
        "replicas": compiled(higgs, ["--processes.vocoder.num_replicas", "2", "--processes.vocoder.replica_devices", "1,2"], num_gpus=3),
        "tp+replicas": compiled(higgs, [
            "--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1",
            "--processes.pipeline.num_replicas", "2", "--processes.pipeline.replica_devices", "2,3,4,5",
            "--stages.vocoder.process", "pipeline",
        ]),
        "ray": compiled(higgs, [
            "--processes.vocoder.ray.resources.node_b", "1", "--processes.vocoder.ray.num_cpus", "0.5",
            "--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1",
            "--processes.pipeline.ray.label_selector.zone", "a",
        ]),
        "cpu": compiled({"stages": [{"name": "a", "factory": "m.x:a", "next": "b"}, {"name": "b", "factory": "m.x:b", "terminal": True}]}),
    }


@pytest.mark.parametrize("variant", ["plain", "tp", "replicas", "tp+replicas", "ray", "cpu"])
def test_json_round_trip(higgs, variant):
    topology = _variants(higgs)[variant]
    text = topology.to_json()
    assert CompiledTopology.from_json(text) == topology
    assert CompiledTopology.from_dict(json.loads(text)) == topology
    assert CompiledTopology.from_json(topology.to_json(indent=None)) == topology


def test_to_dict_is_plain_json_data(higgs):
    data = _variants(higgs)["tp+replicas"].to_dict()

    def check(value):
        assert isinstance(value, (dict, list, str, int, float, bool, type(None))), type(value)
        if isinstance(value, dict):
            assert all(isinstance(k, str) for k in value)
            for v in value.values():
                check(v)
        elif isinstance(value, list):
            for v in value:
                check(v)

    check(data)
    assert json.loads(json.dumps(data)) == data


def test_qwen_reason_survives_round_trip(qwen3):
    topology = compiled(qwen3)
    again = CompiledTopology.from_json(topology.to_json())
    assert again.edges[0].process_local_reason == topology.edges[0].process_local_reason is not None


def test_compile_is_pure_and_deterministic(higgs):
    config = raw_config(higgs)
    before = config.model_dump()
    first, second = compile(config), compile(config)
    assert first == second and first.to_json() == second.to_json()
    assert config.model_dump() == before


def test_topology_values_are_frozen(higgs):
    topology = compiled(higgs)
    with pytest.raises(dataclasses.FrozenInstanceError):
        topology.name = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        topology.processes[0].name = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        topology.edges[0].cross_process = False  # type: ignore[misc]


def test_lookups(higgs):
    topology = compiled(higgs)
    assert topology.stage("vocoder").name == "vocoder"
    assert topology.process("pipeline").stages == ("tts_engine",)
    with pytest.raises(KeyError):
        topology.stage("nope")
    with pytest.raises(KeyError):
        topology.process("nope")


def test_compile_file_equals_compile_of_load(higgs):
    path = FIXTURES / "higgs_tts.yaml"
    assert compile_file(path) == compiled(higgs)
    assert compile_file(path, ["--stages.vocoder.gpu", "1"], num_gpus=2) == compiled(higgs, ["--stages.vocoder.gpu", "1"], num_gpus=2)


def test_ray_placement_travels_as_plain_data_to_every_rank(higgs):
    """processes.<P>.ray reaches the runtime in the topology (the compiler never imports Ray)."""
    topology = _variants(higgs)["ray"]
    assert topology.process("vocoder").ray == {"resources": {"node_b": 1.0}, "num_cpus": 0.5}
    assert [p.ray for p in topology.processes if p.declared_process == "pipeline"] == [{"label_selector": {"zone": "a"}}] * 2
    assert topology.process("tts_frontend").ray == {}
    from omni_compiler import render

    text = render.text(topology)
    assert "ray placement (used by --backend ray):" in text
    assert "vocoder: resources {node_b: 1}, num_cpus 0.5" in text
