"""omni-lint on the real model packages: clean as committed, and a removed declaration is caught."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from omni_lint import Settings, Severity, lint

OMNI_MODELS = Path(__file__).resolve().parents[1] / "packages" / "omni-models" / "src" / "omni_models"


def run_lint(path: Path, cwd: Path):
    return lint([path], Settings(base=cwd), cwd=cwd)


def test_omni_models_tree_is_clean():
    report = run_lint(OMNI_MODELS, cwd=OMNI_MODELS.parent)
    errors = [f.render() for f in report.findings if f.severity is Severity.ERROR]
    assert errors == []
    assert report.exit_code == 0
    assert report.models >= 1


@pytest.mark.parametrize(
    ("model", "state"),
    [
        ("qwen3_tts", "_PREPARED_REQUESTS"),
        ("fun_cosyvoice3", "_PREPARED_REQUESTS"),
        ("moss_tts_local", "PREPARED_QUEUE"),
        ("moss_tts_delay", "PREPARED_QUEUE"),
    ],
)
def test_removing_a_backed_edge_fails_naming_it(tmp_path, model, state):
    """In a temp copy, drop the declared preprocessing -> tts_engine edge of a model with a real handoff."""
    shutil.copytree(OMNI_MODELS, tmp_path / "omni_models", ignore=shutil.ignore_patterns("__pycache__"))
    pipeline = tmp_path / "omni_models" / model / "pipeline.yaml"
    data = yaml.safe_load(pipeline.read_text())
    before = len(data["process_local_edges"])
    data["process_local_edges"] = [e for e in data["process_local_edges"] if (e["src"], e["dst"]) != ("preprocessing", "tts_engine")]
    assert len(data["process_local_edges"]) == before - 1, f"{model} no longer declares preprocessing -> tts_engine"
    pipeline.write_text(yaml.safe_dump(data, sort_keys=False))

    report = run_lint(pipeline, cwd=tmp_path)
    assert report.exit_code == 1
    errors = [f for f in report.findings if f.severity is Severity.ERROR]
    assert errors and all(f.code == "OL001" for f in errors)
    assert all("declare process_local_edges preprocessing -> tts_engine" in f.message for f in errors)
    assert all(f"omni_models/{model}/pipeline.yaml" in f.message for f in errors)
    assert state in {f.message.split(" ", 1)[0] for f in errors}
