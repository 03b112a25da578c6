"""Every pipeline file in the repository (configs/ and the models' pipelines) against the published
JSON Schema and through the real `omni-compile` CLI, as CI and an editor see them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
MODEL_PIPELINES = sorted((ROOT / "packages" / "omni-models" / "src" / "omni_models").glob("*/pipeline*.yaml"))


def omni_compile(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "omni_compiler.cli", *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    result = omni_compile("schema")
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_repository_has_the_files_these_tests_check() -> None:
    assert len(CONFIGS) >= 5, CONFIGS
    assert any("extends" in yaml.safe_load(p.read_text()) for p in CONFIGS), "a deployment file must be among them"
    assert len(MODEL_PIPELINES) >= 11, MODEL_PIPELINES


@pytest.mark.parametrize("path", CONFIGS + MODEL_PIPELINES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_pipeline_file_validates_against_the_published_schema(validator, path: Path) -> None:
    """Deployment files (extends:) included: an editor using the schema must not flag a valid file."""
    assert [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))] == []


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_config_compiles_or_fails_as_its_name_says(path: Path) -> None:
    result = omni_compile("validate", path)
    assert "Traceback" not in result.stderr
    if path.name.endswith(".invalid.yaml"):
        assert result.returncode == 1, result.stdout
        assert "  rule: " in result.stderr and "  fix:  " in result.stderr
    else:
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0].split(" : ")[0].strip()
