"""Fixtures for the omni-config tests (plain helpers live in config_helpers.py)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from config_helpers import FIXTURES, fixture_dict

from omni_config import registry


@pytest.fixture
def higgs() -> dict[str, Any]:
    return fixture_dict("higgs_tts")


@pytest.fixture
def qwen3() -> dict[str, Any]:
    return fixture_dict("qwen3_tts")


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """write("deploy.yaml", yaml_text) -> path, relative to a per-test directory."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return _write


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A directory holding copies of the fixture pipelines (deployment files extend them)."""
    target = tmp_path / "models"
    target.mkdir()
    for source in FIXTURES.glob("*.yaml"):
        (target / source.name).write_text(source.read_text(), encoding="utf-8")
    return target


@pytest.fixture
def clean_registry():
    """Undo register_model() calls so tests cannot leak model names into each other."""
    saved = dict(registry._registered)
    yield registry.register_model
    registry._registered.clear()
    registry._registered.update(saved)
