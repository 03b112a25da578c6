"""The records path (``load_records``) is the pydantic path without the model classes.

``omni-compile`` validates through pydantic-core with a core schema generated
from the pydantic models; these tests hold the two paths to the same values and
the same errors, and hold the generated file to the models.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from config_helpers import FIXTURES, fixture_dict
from hypothesis import given
from test_config_properties import CONFIG, SETTINGS, TOKENS

from omni_config import ConfigError, load_config, load_records, raw_config, raw_records, records, snapshot
from omni_config.schema import PipelineConfig

REPO_CONFIGS = sorted((Path(__file__).resolve().parents[3] / "configs").glob("*.yaml"))


def _outcome(load, *args: Any) -> tuple[str, Any]:
    """('ok', plain data) or ('error', issues): what a user of either path sees."""
    try:
        result = load(*args)
    except ConfigError as error:
        return "error", [issue.to_dict() for issue in error.issues]
    data = result.to_dict() if isinstance(result, records.Record) else result.model_dump()
    return "ok", data


def test_generated_core_schema_is_current():
    assert snapshot.TARGET.read_text(encoding="utf-8") == snapshot.render(), "run `python -m omni_config.snapshot`"


def test_snapshot_check_command_exits_0_when_current():
    result = subprocess.run([sys.executable, "-m", "omni_config.snapshot", "--check"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", [*sorted(FIXTURES.glob("*.yaml")), *REPO_CONFIGS], ids=lambda p: p.name)
def test_every_config_file_gives_the_same_outcome(path):
    assert _outcome(load_records, path) == _outcome(load_config, path)


@SETTINGS
@given(CONFIG)
def test_random_configs_give_the_same_values_or_the_same_errors(data):
    assert _outcome(raw_records, data) == _outcome(raw_config, data)


@SETTINGS
@given(TOKENS)
def test_random_overrides_give_the_same_values_or_the_same_errors(tokens):
    higgs = fixture_dict("higgs_tts")
    assert _outcome(raw_records, higgs, tokens) == _outcome(raw_config, higgs, tokens)


def test_records_read_like_the_models(higgs):
    higgs["stages"][2]["gpu"] = [0, 1]
    higgs["stages"][2]["tp_size"] = 2
    model, record = raw_config(higgs), raw_records(higgs)
    assert isinstance(record, records.PipelineConfig) and isinstance(record.stages[0], records.StageConfig)
    assert record.entry == model.entry and record.stage_names == model.stage_names
    for m, r in zip(model.stages, record.stages, strict=True):
        assert (r.gpu_ids, r.memory_fraction, r.process) == (m.gpu_ids, m.memory_fraction, m.process)
    assert record.stage("tts_engine").gpu_ids == (0, 1)
    with pytest.raises(KeyError):
        record.stage("nope")


def test_records_are_frozen_and_compare_by_value(higgs):
    first, second = raw_records(higgs), raw_records(higgs)
    assert first == second and first is not second
    with pytest.raises(AttributeError, match="frozen"):
        first.stages[0].process = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen"):
        del first.name  # type: ignore[misc]
    assert repr(first.placement).startswith("PlacementConfig(max_total_gpu_memory_fraction_per_gpu=1.0")


def test_defaults_are_shared_but_unchangeable(higgs):
    a, b = raw_records(higgs), raw_records(higgs)
    assert a.stages[0].runtime == b.stages[0].runtime
    assert a.placement.to_dict() == PipelineConfig.model_validate(higgs).placement.model_dump()


def test_load_records_never_builds_the_pydantic_models():
    code = (
        "import sys, omni_config\n"
        f"config = omni_config.load_records({str(FIXTURES / 'higgs_tts.yaml')!r})\n"
        "assert config.entry == 'preprocessing'\n"
        "built = sorted(m for m in ('pydantic.main', 'omni_config.schema') if m in sys.modules)\n"
        "assert not built, built\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_the_models_are_still_exported_lazily():
    import omni_config
    from omni_config import schema

    assert omni_config.PipelineConfig is schema.PipelineConfig
    assert omni_config.json_schema is schema.json_schema
    assert "StageConfig" in dir(omni_config)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        omni_config.Nope  # noqa: B018


def test_a_refused_generated_schema_falls_back_to_the_models(monkeypatch, higgs):
    """Another pydantic-core than the one the file was generated with: still validates, same values."""
    from omni_config import _core_schema, core

    monkeypatch.setattr(_core_schema, "CORE_SCHEMA", {"type": "no-such-schema-type"})
    core._validator.cache_clear()
    try:
        assert _outcome(raw_records, higgs) == _outcome(raw_config, higgs)
        higgs["stages"][0]["proces"] = "x"
        assert _outcome(raw_records, higgs) == _outcome(raw_config, higgs)
    finally:
        core._validator.cache_clear()
