"""The exported JSON Schema is a valid Draft 2020-12 schema that agrees with the pydantic model."""

from __future__ import annotations

import copy

import jsonschema
import pytest
from config_helpers import fixture_dict

from omni_config import json_schema


@pytest.fixture(scope="module")
def validator():
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_schema_metadata():
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "urn:omni:pipeline-config:v1"
    assert schema["title"] == "omni pipeline config"
    assert schema["$defs"]["PipelineConfig"]["required"] == ["stages"]
    assert schema["$defs"]["DeploymentConfig"]["required"] == ["extends"]


DEPLOYMENT = {
    "extends": "higgs_tts.yaml",
    "stages": [
        {"name": "vocoder", "process": "vocoder", "gpu": 1, "runtime": {"resources": {"total_gpu_memory_fraction": 0.2}}},
        {"name": "tts_engine", "tp_size": 2, "gpu": [0, 1], "factory_args": {"max_batch": 8}},
    ],
    "processes": {"vocoder": {"num_replicas": 2, "replica_devices": [1, 2]}},
    "placement": {"max_total_gpu_memory_fraction_per_gpu": 0.95},
}


def test_schema_accepts_a_deployment_file(validator):
    assert [e.message for e in validator.iter_errors(DEPLOYMENT)] == []


@pytest.mark.parametrize(("mutate", "word"), [
    (lambda d: d.__setitem__("entry_stage", "x"), "entry_stage"),
    (lambda d: d["stages"][0].__setitem__("next", ["x"]), "next"),
    (lambda d: d["stages"][0].__setitem__("factory", "a.b:c"), "factory"),
    (lambda d: d["stages"][0].pop("name"), "name"),
    (lambda d: d.__setitem__("extends", ""), "non-empty"),
    (lambda d: d["stages"][0].__setitem__("tp_size", 0), "minimum"),
], ids=["model-tier-top-key", "wiring", "factory", "stage-without-name", "empty-extends", "tp-range"])
def test_schema_holds_deployment_files_to_the_deployment_tier(validator, mutate, word):
    deployment = copy.deepcopy(DEPLOYMENT)
    mutate(deployment)
    messages = [e.message for e in validator.iter_errors(deployment)]
    assert any(word in m for m in messages), messages


@pytest.mark.parametrize("name", ["higgs_tts", "qwen3_tts", "ming_omni_tts"])
def test_schema_accepts_the_fixture_pipelines(validator, name):
    assert [e.message for e in validator.iter_errors(fixture_dict(name))] == []


def test_schema_accepts_documented_shorthands(validator, higgs):
    higgs["stages"][2]["next"] = "vocoder"
    higgs["stages"][2]["stream_to"] = ["vocoder"]
    higgs["processes"] = {"vocoder": {"num_replicas": 1, "replica_devices": 1}}
    assert list(validator.iter_errors(higgs)) == []


@pytest.mark.parametrize("mutate", [
    lambda d: d["stages"][0].__setitem__("procss", "x"),
    lambda d: d.__setitem__("placment", {}),
    lambda d: d["stages"][1]["runtime"]["resources"].__setitem__("total_gpu_memory_fraction", 1.5),
    lambda d: d["stages"][2].__setitem__("tp_size", 0),
    lambda d: d.__setitem__("stages", []),
    lambda d: d.__setitem__("processes", {"vocoder": {"num_replicas": 0}}),
    lambda d: d.__setitem__("process_local_edges", [{"src": "a", "dst": "b"}]),
], ids=["unknown-stage-key", "unknown-top-key", "fraction-range", "tp-range", "no-stages", "replicas-range", "edge-without-reason"])
def test_schema_rejects_what_the_loader_rejects(validator, higgs, mutate):
    mutate(higgs)
    assert list(validator.iter_errors(higgs))
