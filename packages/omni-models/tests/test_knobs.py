"""Every model's knobs: declared in its pipeline file with their defaults, types and ranges, equal
to the catalog's Python defaults, settable from the command line (the README's
``--stages.tts_engine.factory_args.max_batch_size 16``), and a bad value refused by every CLI
before anything starts (exit 1, path, value, rule, fix, no traceback)."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest
from helpers import build_stages, pipeline_file, topology
from models_table import CASES

from omni_config import load_config
from omni_models.common.catalog import MODELS
from omni_models.common.spec import knob_defaults

ROLES = {
    "build_preprocessing": "loader",
    "build_speaker_encoder": "loader",
    "build_audio_encoder": "loader",
    "build_tts_engine": "engine",
    "build_tts_generation": "engine",
    "build_vocoder": "vocoder",
}
PYTHON_TYPES = {"int": int, "float": float, "str": str, "bool": bool}
CATALOG = {spec.name: spec for spec in MODELS}
#: The pipelines of published checkpoints (README "Serving a real checkpoint").
REAL_PIPELINES = [("qwen3_tts_12hz", "pipeline"), ("higgs_tts_real", "pipeline")]
ALL_PIPELINES = [(c.folder, c.variant) for c in CASES] + [("espeak", "pipeline"), *REAL_PIPELINES]
#: The stage whose continuous batch ``max_batch_size`` bounds (Ming's latent engine and espeak have none).
BATCHING = {c.model_id: ("tts_generation" if c.folder == "voxtral_tts" else "tts_engine") for c in CASES if c.folder != "ming_omni_tts"}


def _omni(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "omni_runtime.cli", *args], check=False, capture_output=True, text=True, timeout=300)


def _omni_compile(*args: str) -> subprocess.CompletedProcess:
    """``omni-compile ARGS`` (its console script's function, so the sources under test run)."""
    code = "import sys; from omni_compiler.cli import entry; sys.exit(entry())"
    return subprocess.run([sys.executable, "-c", code, *args], check=False, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("folder", "variant"), ALL_PIPELINES, ids=[f"{f}/{v}" for f, v in ALL_PIPELINES])
def test_every_factory_argument_is_a_typed_knob_but_the_catalog_row(folder, variant):
    for stage in load_config(pipeline_file(folder, variant)).stages:
        assert set(stage.factory_args) - set(stage.knobs) <= {"model"}, stage.name
        for name, knob in stage.knobs.items():
            default = stage.factory_args[name]
            assert default is None or isinstance(default, PYTHON_TYPES[knob.type]) or (knob.type == "float" and isinstance(default, int)), (stage.name, name)
            if knob.type in ("int", "float"):
                assert knob.min is not None, f"{stage.name}.{name} has no lower bound"


@pytest.mark.parametrize(("folder", "variant"), REAL_PIPELINES, ids=[f for f, _ in REAL_PIPELINES])
def test_every_parameter_of_a_real_pipelines_factories_is_a_declared_knob(folder, variant):
    """A deployment can tune whatever the factory takes, but what the runtime passes (model_path, device)."""
    for stage in load_config(pipeline_file(folder, variant)).stages:
        module, _, name = stage.factory.partition(":")
        parameters = set(inspect.signature(getattr(importlib.import_module(module), name)).parameters) - {"model_path", "device"}
        assert parameters == set(stage.knobs) == set(stage.factory_args), stage.name


def test_the_real_qwen3_vocoders_batch_is_a_knob_that_omni_compile_validate_checks():
    model = "Qwen/Qwen3-TTS-12Hz-1.7B-Base"
    assert _omni_compile("validate", model, "--stages.vocoder.factory_args.max_batch_size", "8").returncode == 0
    out = _omni_compile("validate", model, "--stages.vocoder.factory_args.max_batch_size", "0", "--stages.tts_engine.factory_args.load_format", "dummy")
    assert out.returncode == 1
    assert "stages.vocoder.factory_args.max_batch_size = 0" in out.stderr and "stages.tts_engine.factory_args.load_format = 'dummy'" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("case", [c for c in CASES if c.folder in CATALOG], ids=lambda c: c.model_id)
def test_pipeline_knobs_equal_the_catalog_defaults(case):
    spec = CATALOG[case.folder]
    for stage in topology(case.folder, case.variant).stages:
        role = ROLES[stage.factory.rpartition(":")[2]]
        args = {k: v for k, v in stage.factory_args.items() if k != "model"}
        if role == "loader" and not args:
            continue  # a preprocessing without weights
        expected = knob_defaults(spec, role)
        if case.variant == "pipeline_split" and stage.name == "vocoder":
            expected = {**expected, "codec_device": "cuda:1"}
        assert args == expected, stage.name


@pytest.mark.parametrize("case", [c for c in CASES if c.model_id in BATCHING], ids=lambda c: c.model_id)
def test_max_batch_tokens_may_not_go_below_the_models_context(case):
    """The one batching rule that depends on the model is declared with the model's own number,
    so it too is refused before start instead of by the engine at startup."""
    engine = load_config(pipeline_file(case.folder, case.variant)).stage(BATCHING[case.model_id])
    context = CATALOG[case.folder].max_seq_len if case.folder in CATALOG else importlib.import_module(f"omni_models.{case.folder}.stages").AR.max_seq_len
    assert engine.knobs["max_batch_tokens"].min == context
    out = _omni_compile("validate", case.model_id, f"--stages.{BATCHING[case.model_id]}.factory_args.max_batch_tokens", str(context - 1))
    assert out.returncode == 1 and f"an integer >= {context}, or null" in out.stderr, out.stderr


@pytest.mark.parametrize("model_id", sorted(BATCHING))
def test_max_batch_size_16_from_the_command_line(model_id):
    out = _omni_compile("validate", model_id, f"--stages.{BATCHING[model_id]}.factory_args.max_batch_size", "16")
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("model_id", sorted(BATCHING))
def test_the_scheduler_is_a_knob_of_every_batching_engine(model_id):
    """``--stages.<engine>.factory_args.scheduler fifo`` works for every model; a bad value is exit 1."""
    stage = BATCHING[model_id]
    assert _omni_compile("validate", model_id, f"--stages.{stage}.factory_args.scheduler", "fifo").returncode == 0
    out = _omni_compile("validate", model_id, f"--stages.{stage}.factory_args.scheduler", "lifo")
    assert out.returncode == 1 and f"stages.{stage}.factory_args.scheduler = 'lifo'" in out.stderr and "Traceback" not in out.stderr, out.stderr


@pytest.mark.parametrize("folder", ["zonos2", "qwen3_tts", "voxtral_tts"])
def test_the_engine_runs_with_the_batch_size_the_command_line_set(folder):
    case = next(c for c in CASES if c.folder == folder)
    stage = BATCHING[case.model_id]
    built = build_stages(folder, overrides=[f"--stages.{stage}.factory_args.max_batch_size", "16", "--stages.vocoder.factory_args.max_batch_size", "2"])
    assert built[stage].engine.scheduler.limits.max_batch_size == 16
    assert built["vocoder"].combiner is not None and built["vocoder"].combiner.max_batch == 2


@pytest.mark.parametrize(
    "command",
    [
        ["synthesize", "Hello.", "-o", "{tmp}/out.wav"],
        ["serve", "--port", "0"],
    ],
    ids=["synthesize", "serve"],
)
def test_a_bad_knob_stops_the_cli_before_start(command, tmp_path):
    args = [part.replace("{tmp}", str(tmp_path)) for part in command]
    out = _omni(*args, "--stages.vocoder.factory_args.sample_rate", "0", "--stages.tts_engine.factory_args.words_per_minute", "9000")
    assert out.returncode == 1, out.stderr
    assert "stages.vocoder.factory_args.sample_rate = 0" in out.stderr
    assert "rule: sample_rate must be an integer between 8000 and 192000" in out.stderr
    assert "fix:  set stages.vocoder.factory_args.sample_rate to an integer between 8000 and 192000" in out.stderr
    assert "stages.tts_engine.factory_args.words_per_minute = 9000" in out.stderr  # every bad value at once
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "out.wav").exists()


def test_omni_compile_validate_refuses_a_codec_models_bad_knob():
    out = _omni_compile(
        "validate", "zyphra/zonos2", "--stages.tts_engine.factory_args.temperature", "-1",
        "--stages.tts_engine.factory_args.model", "audar_tts", "--stages.vocoder.factory_args.max_batch", "2",
    )
    assert out.returncode == 1
    assert "stages.tts_engine.factory_args.temperature = -1" in out.stderr and "a number between 0 and 10" in out.stderr
    assert "'model' of stage 'tts_engine' is fixed by the model, not a knob" in out.stderr
    assert "stage 'vocoder' declares no knob 'max_batch'" in out.stderr and "did you mean 'max_batch_size'" in out.stderr
    assert "Traceback" not in out.stderr


def test_omni_synthesize_runs_with_a_knob_from_the_command_line(tmp_path):
    out = _omni("synthesize", "Hello there.", "-o", str(tmp_path / "out.wav"), "--model", "zyphra/zonos2", "--device", "cpu",
                "--stages.tts_engine.factory_args.max_batch_size", "16", "--stages.tts_engine.factory_args.first_chunk_frames", "4")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "out.wav").stat().st_size > 44
