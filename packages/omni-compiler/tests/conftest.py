"""Fixtures for the omni-compiler tests (plain helpers live in compiler_helpers.py)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from compiler_helpers import FIXTURES, fixture_dict


@pytest.fixture
def higgs() -> dict[str, Any]:
    return fixture_dict("higgs_tts")


@pytest.fixture
def qwen3() -> dict[str, Any]:
    return fixture_dict("qwen3_tts")


@pytest.fixture
def ming() -> dict[str, Any]:
    return fixture_dict("ming_omni_tts")


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return _write


@pytest.fixture
def model_files(tmp_path: Path) -> Path:
    """Copies of the fixture pipelines in a temp dir, for deployment files to extend."""
    for source in FIXTURES.glob("*.yaml"):
        (tmp_path / source.name).write_text(source.read_text(), encoding="utf-8")
    return tmp_path


@pytest.fixture
def cli(capsys):
    """cli("show", path, ...) -> (exit code, stdout, stderr) through omni_compiler.cli.main."""
    from omni_compiler.cli import main

    def _run(*argv: Any) -> tuple[int, str, str]:
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        return code, out, err

    return _run
