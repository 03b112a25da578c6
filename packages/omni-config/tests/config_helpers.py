"""Helpers for the omni-config tests.

The fixture pipelines under ``fixtures/`` have the shapes the spec documents
(Higgs-TTS, Qwen3-TTS, Ming-Omni-TTS); factories are dotted paths that are never
imported, which is exactly what omni-config promises. A uniquely named module (not
``conftest``) so several packages' suites can run in one pytest process.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from omni_config import ConfigError

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
