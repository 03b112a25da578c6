"""The fixture model packages: one valid and one invalid folder per pattern."""

from __future__ import annotations

from conftest import FIXTURES, run_lint

from omni_lint import Severity


def _by_code(report, code):
    return [f for f in report.findings if f.code == code]


def test_context_pair_declared_is_clean():
    report = run_lint(FIXTURES / "context_pair" / "qwenlike", cwd=FIXTURES / "context_pair")
    assert report.findings == ()
    assert report.exit_code == 0


def test_context_pair_undeclared_reports_both_directions():
    report = run_lint(FIXTURES / "context_pair" / "qwenlike_undeclared", cwd=FIXTURES / "context_pair")
    assert report.exit_code == 1
    assert [(f.path, f.line, f.col, f.code) for f in report.findings] == [
        ("qwenlike/stages.py", 10, 1, "OL001"),
        ("qwenlike/stages.py", 11, 1, "OL001"),
    ]
    context, prepared = report.findings
    # the engine's builder hook (overriding ARWorker.on_build) writes the context, preprocessing reads it
    assert context.message.startswith(
        "_PREPROCESSING_CONTEXT (qwenlike/stages.py:10) is written by stage tts_engine (qwenlike/stages.py:23) "
        "and read by stage preprocessing (qwenlike/stages.py:16)"
    )
    assert "qwenlike_undeclared/pipeline.yaml" in context.message
    assert "declare process_local_edges preprocessing -> tts_engine" in context.message
    # preprocessing writes prepared requests, the engine's take() (called by the base class) pops them: the pop is cited, not the membership probe
    assert prepared.message.startswith(
        "_PREPARED_REQUESTS (qwenlike/stages.py:11) is written by stage preprocessing (qwenlike/stages.py:17) "
        "and read by stage tts_engine (qwenlike/stages.py:31)"
    )


def test_prepared_request_queue_popped_through_returned_closure():
    root = FIXTURES / "prepared_queue"
    assert run_lint(root / "mosslike", cwd=root).findings == ()
    report = run_lint(root / "mosslike_undeclared", cwd=root)
    assert report.exit_code == 1
    (finding,) = report.findings
    assert (finding.path, finding.line, finding.code) == ("mosslike/handoff.py", 3, "OL001")
    # written through functools.partial(_prepare) -> PREPARED.publish, read in the closure make_consumer() returns
    assert "PREPARED (mosslike/handoff.py:3) is written by stage preprocessing (mosslike/stages.py:7)" in finding.message
    assert "read by stage tts_engine (mosslike/handoff.py:10)" in finding.message
    assert "declare process_local_edges preprocessing -> tts_engine" in finding.message


def test_codec_cache_shared_by_two_stages_is_not_a_handoff():
    report = run_lint(FIXTURES / "codec_cache")
    assert report.findings == ()


def test_payload_only_model_with_compatibility_guard_is_info_only():
    report = run_lint(FIXTURES / "payload_only")
    assert report.exit_code == 0
    (finding,) = report.findings
    assert finding.severity is Severity.INFO
    assert (finding.path, finding.line, finding.code) == ("voxtrallike/pipeline.yaml", 13, "OL100")
    assert "preprocessing -> tts_generation" in finding.message
    assert "compatibility guard preserving the previous process-split allowlist" in finding.message


def test_global_sentinels_and_deque():
    root = FIXTURES / "sentinel"
    assert run_lint(root / "cosylike_declared", cwd=root).findings == ()
    report = run_lint(root / "cosylike", cwd=root)
    assert [(f.path, f.line, f.code) for f in report.findings] == [
        ("cosylike/runtime_state.py", 18, "OL001"),
        ("cosylike/runtime_state.py", 19, "OL001"),
    ]
    flow, mels = report.findings
    assert flow.message.startswith("_FLOW ") and "written by stage tts_engine" in flow.message and "read by stage vocoder" in flow.message
    assert mels.message.startswith("PENDING_MELS ") and "declare process_local_edges tts_engine -> vocoder" in mels.message
    # _ENGINE (None rebound through `global` in preprocessing, read by the engine) is declared: not reported
    assert not any("_ENGINE" in f.message for f in report.findings)


def test_class_registry_and_fanout_branches():
    report = run_lint(FIXTURES / "branches")
    assert [(f.path, f.line, f.code) for f in report.findings] == [
        ("fanout/registry.py", 4, "OL001"),
        ("fanout/registry.py", 15, "OL002"),
    ]
    registry, side = report.findings
    assert registry.message.startswith("SpeakerRegistry._speakers ")
    assert "declare process_local_edges speaker_encode -> merge, merge -> tts_engine (edges to add)" in registry.message
    assert "no pipeline path in fanout/pipeline.yaml joins speaker_encode and text_encode" in side.message
    assert "must move into the payload" in side.message


def test_constants_sentinels_locks_and_locals_are_not_state():
    report = run_lint(FIXTURES / "not_state")
    assert report.findings == ()


def test_reviewed_suppression_hides_the_finding():
    root = FIXTURES / "suppressed"
    report = run_lint(root / "reviewed", cwd=root)
    assert report.findings == ()
    assert report.suppressed == 1


def test_bare_suppression_is_reported_and_suppresses_nothing():
    root = FIXTURES / "suppressed"
    report = run_lint(root / "bare", cwd=root)
    assert [(f.path, f.line, f.code) for f in report.findings] == [("bare/stages.py", 1, "OL800"), ("bare/stages.py", 2, "OL001")]
    assert "must name" in report.findings[0].message or "does not name a code" in report.findings[0].message


def test_broken_models_are_findings_not_crashes():
    report = run_lint(FIXTURES / "broken")
    assert [(f.path, f.line, f.code) for f in report.findings] == [
        ("badconfig/pipeline.yaml", 5, "OL901"),
        ("badrefs/pipeline.yaml", 3, "OL003"),
        ("badrefs/pipeline.yaml", 10, "OL004"),
        ("badsyntax/stages.py", 2, "OL900"),
    ]
    config, factory, edge, syntax = report.findings
    assert "stages.preprocessing.nxt" in config.message and "did you mean 'next'?" in config.message
    assert "'badrefs.stages:build_preprocesing'" in factory.message
    assert "tts_engine -> preprocessing" in edge.message and "runs the other way" in edge.message
    assert "syntax error" in syntax.message
    assert report.exit_code == 1
