"""The real model packages: clean as committed, and a removed declaration is caught."""

from __future__ import annotations

import shutil

import pytest
import yaml

from conftest import OMNI_MODELS, run_lint

from omni_lint import Severity

pytestmark = pytest.mark.skipif(not OMNI_MODELS.is_dir(), reason="packages/omni-models is not in this checkout yet")


def test_omni_models_tree_is_clean():
    report = run_lint(OMNI_MODELS, cwd=OMNI_MODELS.parent)
    errors = [f.render() for f in report.findings if f.severity is Severity.ERROR]
    assert errors == []
    assert report.exit_code == 0
    assert report.models >= 1


def test_removing_a_backed_edge_fails_naming_it(tmp_path):
    model = OMNI_MODELS / "qwen3_tts" / "pipeline.yaml"
    if not model.is_file():
        pytest.skip("omni_models/qwen3_tts is not written yet")
    shutil.copytree(OMNI_MODELS, tmp_path / "omni_models", ignore=shutil.ignore_patterns("__pycache__"))
    pipeline = tmp_path / "omni_models" / "qwen3_tts" / "pipeline.yaml"
    data = yaml.safe_load(pipeline.read_text())
    before = len(data["process_local_edges"])
    data["process_local_edges"] = [e for e in data["process_local_edges"] if (e["src"], e["dst"]) != ("preprocessing", "tts_engine")]
    assert len(data["process_local_edges"]) == before - 1, "qwen3_tts no longer declares preprocessing -> tts_engine"
    pipeline.write_text(yaml.safe_dump(data, sort_keys=False))

    report = run_lint(tmp_path / "omni_models" / "qwen3_tts", cwd=tmp_path)
    assert report.exit_code == 1
    errors = [f for f in report.findings if f.severity is Severity.ERROR]
    assert errors and all(f.code == "OL001" for f in errors)
    assert all("declare process_local_edges preprocessing -> tts_engine" in f.message for f in errors)
    assert all("omni_models/qwen3_tts/pipeline.yaml" in f.message for f in errors)
    named = {f.message.split(" ", 1)[0] for f in errors}
    assert "_PREPARED_REQUESTS" in named
