"""Suppression comments: must name known codes and a reason; stale ones are reported."""

from __future__ import annotations

from conftest import chain, pipeline_yaml, run_lint, write_tree

from omni_lint import Severity
from omni_lint.suppress import Suppression, scan_python, scan_yaml

HANDOFF = """
_S: dict = {}COMMENT


def build_preprocessing():
    return lambda p: _S.update(x=p)


def build_tts_engine():
    return lambda p: _S["x"]
"""


def _model(tmp_path, comment="", edges=()):
    write_tree(
        tmp_path,
        {
            "m/__init__.py": "",
            "m/stages.py": HANDOFF.replace("COMMENT", comment),
            "m/pipeline.yaml": pipeline_yaml("m", chain("m", ["preprocessing", "tts_engine"]), list(edges)),
        },
    )
    return run_lint(tmp_path)


def test_python_comment_forms():
    source = (
        "a = 1  # omni-lint: ignore[OL001] reviewed: same thread\n"
        "# omni-lint: ignore[OL001, OL002] reviewed twice\n"
        "\n"
        "b = 2\n"
        "c = '# omni-lint: ignore'  # a string is not a comment\n"
        "d = 3  # omni-lint: ignore\n"
        "e = 4  # omni-lint: ignore[] why\n"
        "f = 5  # omni-lint: ignore[OL999] why\n"
        "g = 6  # omni-lint: ignore[OL001]\n"
    )
    items = scan_python("x.py", source)
    good = [i for i in items if isinstance(i, Suppression)]
    bad = [i for i in items if not isinstance(i, Suppression)]
    assert [(s.line, s.codes, s.reason, sorted(s.lines)) for s in good] == [
        (1, ("OL001",), "reviewed: same thread", [1]),
        (2, ("OL001", "OL002"), "reviewed twice", [2, 4]),  # own line: covers the next code line
    ]
    assert [(f.line, f.code) for f in bad] == [(6, "OL800"), (7, "OL800"), (8, "OL800"), (9, "OL800")]
    assert "does not name a code" in bad[0].message
    assert "names no code" in bad[1].message
    assert "unknown code OL999" in bad[2].message
    assert "gives no reason" in bad[3].message


def test_yaml_comment_forms():
    text = "process_local_edges:\n  # omni-lint: ignore[OL100] kept as a compatibility guard\n  - {src: a, dst: b, reason: r}\n  - {src: b, dst: c, reason: r}  # omni-lint: ignore\n"
    items = scan_yaml("p.yaml", text)
    assert isinstance(items[0], Suppression) and sorted(items[0].lines) == [2, 3]
    assert not isinstance(items[1], Suppression) and items[1].code == "OL800" and items[1].line == 4


def test_suppression_on_the_state_line_hides_the_handoff(tmp_path):
    report = _model(tmp_path, comment="  # omni-lint: ignore[OL001] both stages share the sidecar thread")
    assert report.findings == ()
    assert report.suppressed == 1
    assert report.exit_code == 0


def test_suppression_of_another_code_does_not_hide_it_and_is_reported_unused(tmp_path):
    report = _model(tmp_path, comment="  # omni-lint: ignore[OL002] wrong code")
    assert [(f.code, f.severity) for f in report.findings] == [("OL001", Severity.ERROR), ("OL801", Severity.INFO)]
    assert "suppression of OL002 matched no finding" in report.findings[1].message


def test_yaml_suppression_of_a_compatibility_guard(tmp_path):
    write_tree(
        tmp_path,
        {
            "m/__init__.py": "",
            "m/stages.py": "def build_a():\n    return lambda p: p\n\n\ndef build_b():\n    return lambda p: p\n",
            "m/pipeline.yaml": (
                "name: t/m\nstages:\n  - {name: a, factory: 'm.stages:build_a', next: b}\n"
                "  - {name: b, factory: 'm.stages:build_b', terminal: true}\n"
                "process_local_edges:\n"
                "  # omni-lint: ignore[OL100] compatibility guard kept until the rollout is validated\n"
                "  - {src: a, dst: b, reason: compatibility guard}\n"
            ),
        },
    )
    report = run_lint(tmp_path)
    assert report.findings == () and report.suppressed == 1


def test_non_utf8_module_is_a_parse_finding(tmp_path):
    write_tree(tmp_path, {"m/__init__.py": "", "m/pipeline.yaml": pipeline_yaml("m", chain("m", ["preprocessing", "tts_engine"]))})
    (tmp_path / "m" / "stages.py").write_bytes(b"x = 1\ny = '\xff'\n")
    report = run_lint(tmp_path)
    assert [(f.path, f.line, f.code) for f in report.findings] == [("m/stages.py", 2, "OL900")]
    assert "not valid UTF-8" in report.findings[0].message and "PEP 263" in report.findings[0].message
