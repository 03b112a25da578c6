from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from omni_lint import Settings, lint
from omni_lint.cli import main

FIXTURES = Path(__file__).parent / "fixtures"

#: stages.py of a two-stage model (preprocessing -> tts_engine) with an undeclared handoff through _S
HANDOFF = """
_S: dict = {}


def build_preprocessing():
    return lambda p: _S.update(x=p)


def build_tts_engine():
    return lambda p: _S["x"]
"""


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``{relative path: source}`` under ``root`` (dedented); return root."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def pipeline_yaml(package: str, stages: list[tuple[str, str, dict]], edges: list[tuple[str, str, str]] = ()) -> str:
    """A pipeline file: stages as (name, factory function, extra keys), edges as (src, dst, reason)."""
    lines = [f"name: test/{package}", "stages:"]
    for name, function, extra in stages:
        lines.append(f"  - name: {name}")
        lines.append(f"    factory: {package}.stages:{function}")
        for key, value in extra.items():
            rendered = "true" if value is True else f"[{', '.join(value)}]" if isinstance(value, list) else value
            lines.append(f"    {key}: {rendered}")
    if edges:
        lines.append("process_local_edges:")
        for src, dst, reason in edges:
            lines.append(f"  - {{src: {src}, dst: {dst}, reason: {reason}}}")
    return "\n".join(lines) + "\n"


def chain(package: str, names: list[str]) -> list[tuple[str, str, dict]]:
    """A linear pipeline a -> b -> c with factories build_<name>."""
    stages = []
    for i, name in enumerate(names):
        extra: dict = {"next": names[i + 1]} if i + 1 < len(names) else {"terminal": True}
        stages.append((name, f"build_{name}", extra))
    return stages


def run_lint(path: Path, cwd: Path | None = None):
    cwd = cwd or path
    return lint([path], Settings(base=cwd), cwd=cwd)


def codes(report) -> list[str]:
    return [f.code for f in report.findings]


@pytest.fixture
def cli(monkeypatch, capsys):
    """Run ``omni-lint ARGS`` in-process from ``cwd``: returns (exit code, stdout, stderr)."""

    def run(*args: str, cwd: Path) -> tuple[int, str, str]:
        monkeypatch.chdir(cwd)
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run
