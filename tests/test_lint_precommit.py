"""The pre-commit hook, run by the real ``pre-commit try-repo``.

A temporary hook repository carries this checkout's ``.pre-commit-hooks.yaml``,
omni-config and omni-lint; pre-commit builds its own virtualenv from it (``pip
install .`` at the hook repository's root) exactly as for a user. The consumer
is a temporary git repository holding a model with an undeclared handoff.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "packages" / "omni-lint" / "tests" / "fixtures"

#: What the repository root's pyproject.toml must provide for ``language: python``:
#: pre-commit runs ``pip install .`` there, so the root installs omni-lint (and the
#: omni-config it needs) from the packages beside it. Used when the checkout's own
#: root pyproject.toml does not do so yet.
HOOK_ROOT_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "omni-workspace"
version = "0.0.0"
requires-python = ">=3.10"
dependencies = [
  "omni-config @ {root:uri}/packages/omni-config",
  "omni-lint @ {root:uri}/packages/omni-lint",
]

[tool.hatch.metadata]
allow-direct-references = true

[tool.hatch.build.targets.wheel]
bypass-selection = true
"""

_IGNORE = shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache", "tests", "build", "dist")


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env, timeout=60)


def _root_pyproject() -> str:
    real = REPO / "pyproject.toml"
    text = real.read_text() if real.is_file() else ""
    installs_lint = "build-backend" in text and "packages/omni-lint" in text
    return text if installs_lint else HOOK_ROOT_PYPROJECT


def _hook_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "hook-repo"
    repo.mkdir()
    shutil.copy(REPO / ".pre-commit-hooks.yaml", repo / ".pre-commit-hooks.yaml")
    for package in ("omni-config", "omni-lint"):
        shutil.copytree(REPO / "packages" / package, repo / "packages" / package, ignore=_IGNORE)
    (repo / "pyproject.toml").write_text(_root_pyproject())
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "hook repo")
    return repo


def _consumer(tmp_path: Path) -> Path:
    repo = tmp_path / "consumer"
    models = repo / "models"
    for name in ("qwenlike", "qwenlike_undeclared"):
        shutil.copytree(FIXTURES / "context_pair" / name, models / name, ignore=shutil.ignore_patterns("__pycache__"))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "models")
    return repo


def _try_repo(hook_repo: Path, consumer: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), "omni-lint", "--all-files", "--verbose"],
        cwd=consumer,
        capture_output=True,
        text=True,
        env=env,
        timeout=800,
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed by pre-commit")
def test_pre_commit_try_repo_blocks_an_undeclared_handoff(tmp_path):
    hook_repo = _hook_repo(tmp_path)
    consumer = _consumer(tmp_path)
    home = tmp_path / "pre-commit-home"

    failed = _try_repo(hook_repo, consumer, home)
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1, output
    assert "omni-lint (process-local contract)" in output and "Failed" in output
    assert "models/qwenlike/stages.py:11:1: OL001 _PREPARED_REQUESTS" in output
    assert "declare process_local_edges preprocessing -> tts_engine" in output

    # declaring the edge (and committing it) makes the same hook pass
    shutil.copy(consumer / "models" / "qwenlike" / "pipeline.yaml", consumer / "models" / "qwenlike_undeclared" / "pipeline.yaml")
    _git(consumer, "commit", "-q", "-am", "declare the edge")
    passed = _try_repo(hook_repo, consumer, home)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout
