"""Every file under configs/ is checked here, through the real `omni-compile` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from omni_compiler import compile_file, render

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
HIGGS_TABLE = "tts_frontend : preprocessing, audio_encoder\npipeline     : tts_engine\nvocoder      : vocoder"


def omni_compile(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "omni_compiler.cli", *args], capture_output=True, text=True, cwd=ROOT)


def test_every_config_file_has_a_test_below() -> None:
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(
        ["higgs_tts.yaml", "higgs_tts_frontend.yaml", "higgs_tts_ray.yaml", "higgs_tts_vocoder_replicas.yaml", "qwen3_tts.yaml",
         "qwen3_tts_split_preprocessing.invalid.yaml"]
    )


def test_higgs_show_prints_the_spec_table() -> None:
    result = omni_compile("show", "configs/higgs_tts.yaml")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(HIGGS_TABLE + "\n")
    assert "audio_encoder -> tts_engine  next             tts_frontend -> pipeline" in result.stdout
    assert "tts_engine -> vocoder        next, stream_to  pipeline -> vocoder" in result.stdout


def test_higgs_gpu_budget_is_declared_not_inferred() -> None:
    topology = compile_file(CONFIGS / "higgs_tts.yaml")
    (gpu0,) = topology.gpus
    assert gpu0.gpu == 0
    assert [(s.instance, s.stage, s.memory_fraction) for s in gpu0.shares] == [
        ("tts_frontend", "audio_encoder", 0.03),
        ("pipeline", "tts_engine", 0.85),
        ("vocoder", "vocoder", 0.10),
    ]
    assert gpu0.total == 0.98
    assert all(edge.process_local_reason is None for edge in topology.edges)


def test_frontend_redeclaration_is_a_no_op() -> None:
    base = compile_file(CONFIGS / "higgs_tts.yaml")
    redeclared = compile_file(CONFIGS / "higgs_tts_frontend.yaml")
    via_cli = compile_file(CONFIGS / "higgs_tts.yaml", ["--stages.preprocessing.process", "tts_frontend", "--stages.audio_encoder.process", "tts_frontend"])
    assert redeclared == base
    assert via_cli == base
    assert render.table(redeclared) == HIGGS_TABLE


def test_ray_deployment_keeps_the_spec_table_and_places_processes_by_node() -> None:
    """The Ray file only adds placement: the same processes as the model, each with its node resource."""
    result = omni_compile("show", "configs/higgs_tts_ray.yaml", "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["table"] == HIGGS_TABLE.splitlines()
    ray = {p["name"]: p["ray"] for p in data["topology"]["processes"]}
    assert ray["tts_frontend"]["resources"] == {"node_a": 1} and ray["pipeline"]["resources"] == {"node_a": 1}
    assert ray["vocoder"]["resources"] == {"node_b": 1}


def test_vocoder_replicas_on_gpus_1_and_2() -> None:
    result = omni_compile("show", "configs/higgs_tts_vocoder_replicas.yaml", "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["table"] == HIGGS_TABLE.splitlines()
    vocoders = [i for i in data["topology"]["instances"] if i["process"] == "vocoder"]
    assert [(i["name"], i["replica"], [(p["instance_stage"], p["gpu"]) for p in i["stages"]]) for i in vocoders] == [
        ("vocoder@r0", 0, [("vocoder@r0", 1)]),
        ("vocoder@r1", 1, [("vocoder@r1", 2)]),
    ]
    assert [g["gpu"] for g in data["topology"]["gpus"]] == [0, 1, 2]


def test_vocoder_replicas_checked_against_device_count() -> None:
    result = omni_compile("validate", "configs/higgs_tts_vocoder_replicas.yaml", "--gpus", "2")
    assert result.returncode == 1
    assert "error: processes.vocoder.replica_devices = [1, 2]" in result.stderr
    assert "GPU(s) [2] do not exist on a machine with 2 GPU(s)" in result.stderr


def test_qwen3_shaped_file_keeps_its_process_local_edge() -> None:
    result = omni_compile("validate", "configs/qwen3_tts.yaml")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("pipeline : preprocessing, tts_engine, vocoder\n")
    topology = compile_file(CONFIGS / "qwen3_tts.yaml")
    edge = next(e for e in topology.edges if (e.src, e.dst) == ("preprocessing", "tts_engine"))
    assert not edge.cross_process
    assert "_PREPARED_REQUESTS" in edge.process_local_reason


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_splitting_qwen3_preprocessing_is_rejected(fmt: str) -> None:
    result = omni_compile("validate", "configs/qwen3_tts_split_preprocessing.invalid.yaml", "--format", fmt)
    assert result.returncode == 1
    if fmt == "json":
        errors = json.loads(result.stdout)["errors"]
        assert len(errors) == 1
        error = errors[0]
        assert error["path"] == "stages.preprocessing.process"
        assert error["value"] == "tts_frontend"
        assert "preprocessing -> tts_engine must stay inside one OS process" in error["rule"]
        assert "_PREPROCESSING_CONTEXT / _PREPARED_REQUESTS" in error["rule"]
        assert error["fix"].startswith("--stages.preprocessing.process pipeline")
    else:
        assert "Traceback" not in result.stderr
        assert result.stderr.splitlines()[1] == "error: stages.preprocessing.process = 'tts_frontend'"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_factory_a_config_names_exists(path):
    """A full config names its factories by import path: each must be a callable of an installed model
    (a model refactor that moves its stage code must move the example configs with it)."""
    import importlib

    import yaml

    stages = (yaml.safe_load(path.read_text()) or {}).get("stages") or []
    missing = []
    for stage in stages:
        factory = stage.get("factory")
        if not factory:
            continue  # a deployment file: its model's factories are checked with the model
        module, _, name = factory.partition(":")
        try:
            target = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            missing.append(f"{stage['name']}: {factory} ({exc})")
            continue
        if not callable(target):
            missing.append(f"{stage['name']}: {factory} is not callable")
    assert not missing, missing
