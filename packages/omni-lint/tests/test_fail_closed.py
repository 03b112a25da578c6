"""Fail closed: dynamic imports followed or flagged, out-of-tree objects as state, missing modules,
nested stores. Two-stage models (preprocessing -> tts_engine)."""

from __future__ import annotations

from conftest import chain, pipeline_yaml, run_lint, write_tree

STAGES = chain("m", ["preprocessing", "tts_engine"])
UNDECLARED = pipeline_yaml("m", STAGES)
DECLARED = pipeline_yaml("m", STAGES, [("preprocessing", "tts_engine", "prepared requests in m.state")])
STATE = "from collections import defaultdict\nBUCKETS = defaultdict(dict)\n"


def _lint(tmp_path, stages, pipeline=UNDECLARED, extra=None):
    write_tree(tmp_path, {"m/__init__.py": "", "m/pipeline.yaml": pipeline, "m/state.py": STATE, "m/stages.py": stages, **(extra or {})})
    return run_lint(tmp_path)


def test_literal_import_module_and_getattr_are_followed(tmp_path):
    stages = """
        import importlib

        def build_preprocessing():
            state = importlib.import_module("m.state")
            def process(p):
                state.BUCKETS[p.request_id] = p.data
            return process

        def build_tts_engine():
            def process(p):
                return getattr(importlib.import_module(".state", "m"), "BUCKETS").pop(p.request_id)
            return process
    """
    report = _lint(tmp_path, stages)
    assert [f.code for f in report.findings] == ["OL001"]
    assert report.findings[0].message.startswith("BUCKETS (m/state.py:2) is written by stage preprocessing")
    assert _lint(tmp_path, stages, DECLARED).findings == ()  # declared: backed, so no OL100 either


def test_computed_import_marks_the_stage_incomplete_and_withholds_remove_advice(tmp_path):
    stages = """
        import importlib

        def build_preprocessing(name="m.state"):
            return lambda p: importlib.import_module(name)

        def build_tts_engine():
            return lambda p: p
    """
    report = _lint(tmp_path, stages, DECLARED)
    assert [(f.path, f.code, f.severity.value) for f in report.findings] == [("m/stages.py", "OL102", "warning")]
    assert "`importlib.import_module(name)`" in report.findings[0].message
    assert "stage preprocessing in m/pipeline.yaml" in report.findings[0].message
    assert report.exit_code == 0  # a warning, and no OL100 "remove it" advice for the edge


def test_out_of_tree_instance_written_through_methods_is_state(tmp_path):
    stages = """
        import cachetools

        _RESULTS = cachetools.TTLCache(maxsize=64, ttl=30)

        def build_preprocessing():
            return lambda p: _RESULTS.update({p.request_id: p.data})

        def build_tts_engine():
            return lambda p: _RESULTS.get(p.request_id)
    """
    report = _lint(tmp_path, stages)
    assert [f.code for f in report.findings] == ["OL001"]
    assert report.findings[0].message.startswith("_RESULTS (m/stages.py:3)")
    # a reviewed one is suppressed at its definition
    reviewed = stages.replace("ttl=30)", "ttl=30)  # omni-lint: ignore[OL001] each stage keeps its own results")
    assert _lint(tmp_path, reviewed).findings == ()


def test_missing_in_tree_module_is_a_warning(tmp_path):
    stages = """
        from m import helpers_v2
        from .gone import thing

        def build_preprocessing():
            return lambda p: p

        def build_tts_engine():
            return lambda p: p
    """
    report = _lint(tmp_path, stages)
    # ``from m import helpers_v2`` may name an attribute of m: only the missing module is certain
    assert [(f.line, f.code, f.severity.value) for f in report.findings] == [(2, "OL103", "warning")]
    assert report.findings[0].message.startswith("imports m.gone, which is not in the analysed tree")
    assert report.exit_code == 0


def test_nested_store_is_a_write(tmp_path):
    stages = """
        from m.state import BUCKETS

        def build_preprocessing():
            def process(p):
                BUCKETS["prepared"][p.request_id] = p.data
            return process

        def build_tts_engine():
            return lambda p: BUCKETS["prepared"].pop(p.request_id)
    """
    report = _lint(tmp_path, stages)
    assert [f.code for f in report.findings] == ["OL001"]
    assert "written by stage preprocessing (m/stages.py:5)" in report.findings[0].message
