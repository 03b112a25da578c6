"""Every rule's --explain text, and its examples kept honest against the analyser."""

from __future__ import annotations

import textwrap

from conftest import chain, pipeline_yaml, run_lint, write_tree

from omni_lint import RULES
from omni_lint.suppress import Suppression, scan_python


def test_every_rule_explains_itself():
    for code, rule in RULES.items():
        text = rule.explain()
        assert text.startswith(f"{code} {rule.name} ({rule.severity.value})")
        assert rule.summary in text
    assert len({rule.name for rule in RULES.values()}) == len(RULES)


def _python_part(example: str) -> str:
    return "\n".join(line for line in textwrap.dedent(example).splitlines() if not line.startswith("# "))


def test_ol001_examples(tmp_path):
    rule = RULES["OL001"]
    stages = chain("m", ["preprocessing", "tts_engine"])
    write_tree(tmp_path, {"m/__init__.py": "", "m/stages.py": _python_part(rule.invalid), "m/pipeline.yaml": pipeline_yaml("m", stages)})
    assert [f.code for f in run_lint(tmp_path).findings] == ["OL001"]
    # the accepted form: the same code with the declaration shown in the example
    declared = textwrap.dedent(rule.valid).split("# or:")[0].replace("# pipeline.yaml", "").strip()
    (tmp_path / "m" / "pipeline.yaml").write_text(pipeline_yaml("m", stages) + declared + "\n")
    assert run_lint(tmp_path).findings == ()


def test_ol800_examples():
    rule = RULES["OL800"]
    (bad,) = scan_python("x.py", rule.invalid + "\n")
    assert not isinstance(bad, Suppression) and bad.code == "OL800"
    (good,) = scan_python("x.py", rule.valid + "\n")
    assert isinstance(good, Suppression) and good.codes == ("OL001",)
