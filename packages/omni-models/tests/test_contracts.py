"""Each model's pipeline file against the registered-models table and its config class."""

import importlib
import itertools
from importlib.metadata import entry_points

import pytest
from helpers import topology
from models_table import CASES, IDS

from omni_config import load_config, load_model

TABLE_EDGES = {
    "higgs_tts": set(),
    "fishaudio_s2_pro": set(),
    "voxtral_tts": {("preprocessing", "tts_generation")},
    "ming_omni_tts": {("preprocessing", "reference_encode"), ("reference_encode", "tts_engine")},
    "moss_tts_local/pipeline": {("preprocessing", "tts_engine")},
    "moss_tts_local/pipeline_split": {("preprocessing", "tts_engine"), ("tts_engine", "vocoder")},
    "qwen3_tts": {("preprocessing", "tts_engine")},
    "moss_tts_delay": {("preprocessing", "tts_engine")},
    "audar_tts": set(),
    "fun_cosyvoice3": {("preprocessing", "tts_engine")},
    "zonos2": set(),
}


def _key(case):
    return case.folder if case.folder != "moss_tts_local" else f"{case.folder}/{case.variant}"


def _config_class(case):
    return getattr(importlib.import_module(f"omni_models.{case.folder}.config"), case.config_class)


def test_every_model_id_is_registered_as_an_entry_point():
    registered = {ep.name: ep.value for ep in entry_points(group="omni.models")}
    for case in CASES:
        assert registered[case.model_id] == f"omni_models.{case.folder}:{case.variant}"
    assert registered["omni/espeak"] == "omni_models.espeak:pipeline"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_config_class_contract_equals_the_yaml(case):
    config = _config_class(case)()
    assert config.model_id == case.model_id
    pipeline = load_config(config.pipeline_file())
    assert pipeline.name == case.model_id
    assert config.process_local_edges() == list(pipeline.process_local_edges)
    assert {(e.src, e.dst) for e in pipeline.process_local_edges} == TABLE_EDGES[_key(case)]
    assert all(e.reason.strip() for e in pipeline.process_local_edges)
    assert load_model(case.model_id) == pipeline


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_pipeline_wiring_follows_the_table(case):
    pipeline = load_config(_config_class(case)().pipeline_file())
    stages = pipeline.stages
    for stage in stages:
        # a stage is built by the model's own factory or by a shared one reading the model's catalog row
        own = stage.factory.startswith(f"omni_models.{case.folder}.stages:build_")
        shared = stage.factory.startswith("omni_models.common.factories:build_") and stage.factory_args.get("model") == case.folder
        assert own or shared, stage.factory
        module, _, fn = stage.factory.partition(":")
        assert callable(getattr(importlib.import_module(module), fn))
    chain = [s.name for s in stages]
    for a, b in itertools.pairwise(stages):
        assert a.next == [b.name], f"{a.name} -> {b.name}"
    engine = pipeline.stage(case.engine)
    assert engine.stream_to == ([case.vocoder] if case.streams else [])
    assert [s.name for s in stages if s.terminal] == [case.vocoder] == chain[-1:]
    assert pipeline.entry == "preprocessing"


def test_default_processes_and_fractions_from_the_table():
    higgs = load_config(_config_class(CASES[0])().pipeline_file())
    procs = {s.name: (s.process, s.gpu, s.memory_fraction) for s in higgs.stages}
    assert procs["audio_encoder"] == ("tts_frontend", 0, 0.03)
    assert procs["preprocessing"][0] == "tts_frontend"
    assert procs["tts_engine"] == ("pipeline", 0, 0.85)
    assert procs["vocoder"] == ("vocoder", 0, 0.10)

    moss = load_model("openmoss/moss-tts-local")
    assert {s.name: (s.process, s.gpu, s.memory_fraction) for s in moss.stages} == {
        "preprocessing": ("pipeline", 0, 0.15),
        "tts_engine": ("pipeline", 0, 0.67),
        "vocoder": ("vocoder", 0, 0.18),
    }
    split = load_model("openmoss/moss-tts-local-split")
    assert {s.process for s in split.stages} == {"pipeline"}
    assert {s.gpu for s in split.stages} == {0}
    assert split.stage("vocoder").factory_args["codec_device"] == "cuda:1"

    s2 = load_model("fishaudio/s2-pro")
    assert [(s.name, s.process) for s in s2.stages] == [
        ("preprocessing", "preprocessing"), ("tts_engine", "pipeline"), ("vocoder", "pipeline")
    ]
    for model_id in ("mistralai/voxtral-tts", "inclusionai/ming-omni-tts", "qwen/qwen3-tts", "openmoss/moss-tts-delay",
                     "audar/audar-tts", "funaudiollm/fun-cosyvoice3", "zyphra/zonos2"):
        assert {s.process for s in load_model(model_id).stages} == {"pipeline"}, model_id


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_weight_bearing_stages_default_to_dummy_weights(case):
    compiled = topology(case.folder, case.variant)
    weighted = [s for s in compiled.stages if "load_format" in s.factory_args]
    assert weighted, "every model has stages that load weights"
    for stage in weighted:
        assert stage.factory_args["load_format"] == "dummy", stage.name
    for stage in compiled.stages:
        if stage.name == "preprocessing" and "load_format" not in stage.factory_args:
            assert "model_path" not in stage.factory_args


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_fractions_on_one_gpu_fit(case):
    pipeline = load_config(_config_class(case)().pipeline_file())
    assert sum(s.memory_fraction or 0 for s in pipeline.stages) <= 1.0


def test_importing_the_package_stays_light():
    import subprocess
    import sys

    code = "import sys, omni_models; import omni_models.common; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


def test_version_is_single_sourced_from_the_package():
    from importlib.metadata import version

    import omni_models

    assert version("omni-models") == omni_models.__version__
