"""docs/adding-a-model.md works as written: its catalog row and its pipeline file, taken from the
page, validate, compile, build and synthesize with the model's rates and codebooks. A cross-package
test: it reads the repository's docs/, which no package ships."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from omni_compiler import compile as compile_topology
from omni_config import ConfigError, load_config
from omni_models.common import catalog

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "adding-a-model.md"


def _model_test_helpers():
    """omni-models' test helpers, loaded under their own name (another package's tests have a ``helpers``)."""
    spec = importlib.util.spec_from_file_location("omni_models_test_helpers", ROOT / "packages" / "omni-models" / "tests" / "helpers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_helpers = _model_test_helpers()
build_compiled, synthesize = _helpers.build_compiled, _helpers.synthesize


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


@pytest.fixture
def example(monkeypatch, tmp_path):
    row_source = _blocks("python")[0]
    row = eval(row_source.strip().rstrip(","), vars(catalog))  # the page's row, in the catalog's namespace
    monkeypatch.setattr(catalog, "MODELS", (*catalog.MODELS, row))
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(_blocks("yaml")[0], encoding="utf-8")
    return row, pipeline


def test_the_documented_model_synthesizes(example):
    row, pipeline = example
    compiled = compile_topology(load_config(pipeline, ["--stages.tts_engine.factory_args.max_batch_size", "16"]))
    stages = build_compiled(compiled)
    assert stages["tts_engine"].engine.scheduler.limits.max_batch_size == 16
    result = synthesize(None, {"text": "Hello there.", "voice": "nova"}, stages=stages, compiled=compiled)
    assert result.sample_rate == row.codec.sample_rate == 24000
    codes = [chunk["codes"] for chunk in result.emitted["tts_engine"]]
    assert codes and all(c.shape[0] == 6 for c in codes)
    assert result.audio.shape[-1] % row.codec.hop == 0


def test_the_documented_knobs_are_checked(example):
    _, pipeline = example
    with pytest.raises(ConfigError, match=r"stages\.vocoder\.factory_args\.max_batch_size"):
        load_config(pipeline, ["--stages.vocoder.factory_args.max_batch_size", "0"])
