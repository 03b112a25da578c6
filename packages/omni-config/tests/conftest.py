"""Shared helpers for the omni-config tests.

The fixture pipelines under ``fixtures/`` have the shapes the spec documents
(Higgs-TTS, Qwen3-TTS, Ming-Omni-TTS); factories are dotted paths that are never
imported, which is exactly what omni-config promises.
"""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from omni_config import ConfigError, registry

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_dict(name: str) -> dict[str, Any]:
    """A fresh copy of a fixture pipeline as plain data (tests mutate it)."""
    return copy.deepcopy(yaml.safe_load((FIXTURES / f"{name}.yaml").read_text()))


def issues_by_path(error: ConfigError) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for issue in error.issues:
        out.setdefault(issue.path, []).append(issue)
    return out


def raises_config_error(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> ConfigError:
    """Call fn and return the ConfigError it raises (the test fails if it returns)."""
    with pytest.raises(ConfigError) as info:
        fn(*args, **kwargs)
    return info.value


def single_issue(error: ConfigError, path: str):
    matches = [issue for issue in error.issues if issue.path == path]
    assert matches, f"no issue at {path!r}; got {[i.path for i in error.issues]}"
    assert len(matches) == 1, f"{len(matches)} issues at {path!r}: {matches}"
    return matches[0]


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
