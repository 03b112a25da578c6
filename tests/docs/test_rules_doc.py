"""docs/rules.md shows every rule code with a reported and an accepted model tree; each is
written to disk and linted here, so the page says what omni-lint does (Fixit's VALID/INVALID).
A cross-package test: it reads the repository's docs/, which no package ships."""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path

import pytest

from omni_lint import RULES, Settings, lint

DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
MARKER = re.compile(r"<!-- (?:example: (OL\d{3}) (reported|accepted)|end example) -->")
BLOCK = re.compile(r"^```(?:yaml|python) (\S+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _examples() -> dict[tuple[str, str], dict[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    found: dict[tuple[str, str], dict[str, str]] = {}
    marks = list(MARKER.finditer(text))
    for mark, following in pairwise(marks):
        if mark.group(1) is None:
            continue
        body = text[mark.end() : following.start()]
        files = {path: source for path, source in BLOCK.findall(body)}
        assert files, f"{mark.group(0)} has no files"
        found[(mark.group(1), mark.group(2))] = files
    return found


EXAMPLES = _examples()


def test_every_rule_has_both_examples():
    missing = [f"{code} {kind}" for code in RULES for kind in ("reported", "accepted") if (code, kind) not in EXAMPLES]
    assert not missing, f"docs/rules.md lacks examples: {missing}"


@pytest.mark.parametrize(("code", "kind"), sorted(EXAMPLES))
def test_example(tmp_path, code, kind):
    for rel, source in EXAMPLES[(code, kind)].items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
        if rel.endswith(".py"):
            (path.parent / "__init__.py").touch()
    report = lint([tmp_path], Settings(base=tmp_path), cwd=tmp_path)
    codes = sorted({finding.code for finding in report.findings})
    if kind == "reported":
        assert code in codes, f"{code} reported example gave {codes}"
    else:
        assert code not in codes, f"{code} accepted example still gives {code}: {report.findings}"
