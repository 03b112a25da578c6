"""Steps 4-5: edges tagged by kind, and the per-edge process-local contract."""

from __future__ import annotations

import pytest
from compiler_helpers import chain, compiled, only, paths, pipeline, stage, topology_error

from omni_compiler import CompiledEdge

QWEN_REASON = "prepared requests live in _PREPROCESSING_CONTEXT / _PREPARED_REQUESTS, read in-process by the AR engine builder"
MING_REASON = "compatibility guard preserving the previous process-split allowlist"


def _apply_fix(fix: str) -> list[str]:
    """The fix's command-line part (before the parenthesised alternative), as override tokens."""
    return fix.split("  (")[0].split()


# --- edges ---------------------------------------------------------------------------------

def test_edges_are_tagged_by_kind_in_declaration_order():
    stages = [
        stage("a", next=["b", "c"], stream_to="c"),
        stage("b", next="d"),
        stage("c", next="d"),
        stage("d", wait_for=["b", "c"], merge_fn="tests.fake_stages:merge", terminal=True),
    ]
    topology = compiled(pipeline(stages))
    assert topology.edges == (
        CompiledEdge("a", "b", ("next",), True, None),
        CompiledEdge("a", "c", ("next", "stream_to"), True, None),
        CompiledEdge("b", "d", ("next", "wait_for"), True, None),
        CompiledEdge("c", "d", ("next", "wait_for"), True, None),
    )


def test_stream_only_and_wait_only_edges():
    stages = [
        stage("a", next="b", stream_to="c", process="p"),
        stage("b", next="c", process="p"),
        stage("c", wait_for="a", merge_fn="m.x:merge", terminal=True, process="q"),
    ]
    edges = {(e.src, e.dst): e for e in compiled(pipeline(stages)).edges}
    assert edges[("a", "b")].kinds == ("next",) and edges[("a", "b")].cross_process is False
    assert edges[("a", "c")].kinds == ("stream_to", "wait_for") and edges[("a", "c")].cross_process is True
    assert edges[("b", "c")].kinds == ("next",) and edges[("b", "c")].cross_process is True


def test_higgs_cross_process_edges(higgs):
    topology = compiled(higgs)
    assert [(e.src, e.dst, e.kinds, e.cross_process) for e in topology.edges] == [
        ("preprocessing", "audio_encoder", ("next",), False),
        ("audio_encoder", "tts_engine", ("next",), True),
        ("tts_engine", "vocoder", ("next", "stream_to"), True),
    ]
    assert topology.cross_process_edges == topology.edges[1:]


def test_contract_reason_is_carried_on_the_edge(qwen3):
    topology = compiled(qwen3)
    edge = topology.edges[0]
    assert (edge.src, edge.dst, edge.cross_process, edge.process_local_reason) == ("preprocessing", "tts_engine", False, QWEN_REASON)
    assert topology.edges[1].process_local_reason is None


def test_replicas_of_one_process_do_not_make_an_edge_cross_process():
    stages = chain("a", "b")
    for s in stages:
        s["process"] = "p"
    topology = compiled(pipeline(stages), ["--processes.p.num_replicas", "3"])
    assert topology.edges[0].cross_process is False


# --- the contract ----------------------------------------------------------------------------

def test_qwen3_split_is_rejected_with_reason_and_fix(qwen3):
    error = topology_error(qwen3, ["--stages.preprocessing.process", "frontend"])
    issue = only(error, "stages.preprocessing.process")
    assert len(error.issues) == 1
    assert issue.value == "frontend"
    assert issue.rule == (
        f"the edge preprocessing -> tts_engine must stay inside one OS process ({QWEN_REASON}), "
        "but preprocessing runs in 'frontend' and tts_engine in 'pipeline'"
    )
    assert issue.fix == "--stages.preprocessing.process pipeline  (or set process: pipeline on preprocessing in your deployment file)"


def test_applying_the_fix_makes_the_config_valid(qwen3):
    split = ["--stages.preprocessing.process", "frontend"]
    issue = topology_error(qwen3, split).issues[0]
    # the CLI wins over a deployment file, so the fix is stated as an override; here the split
    # is itself an override, so the fix replaces it
    fixed = _apply_fix(issue.fix)
    assert compiled(qwen3, fixed).cross_process_edges == ()


def test_split_of_the_consumer_moves_the_smaller_side(qwen3):
    """Moving tts_engine out of a 3-stage process: the fix moves tts_engine back, not the others."""
    error = topology_error(qwen3, ["--stages.tts_engine.process", "engine", "--stages.tts_engine.runtime.resources.total_gpu_memory_fraction", "0.5",
                                   "--stages.vocoder.runtime.resources.total_gpu_memory_fraction", "0.2"])
    issue = only(error, "stages.tts_engine.process")
    assert _apply_fix(issue.fix) == ["--stages.tts_engine.process", "pipeline"]


def test_split_from_a_deployment_file(model_files, write):
    from omni_compiler import TopologyError, compile_file

    deploy = write("split.yaml", """\
        extends: qwen3_tts.yaml
        stages:
          - name: preprocessing
            process: frontend
        """)
    with pytest.raises(TopologyError) as info:
        compile_file(deploy)
    assert paths(info.value) == ["stages.preprocessing.process"]
    # the fix, given on the command line over the deployment file, compiles
    assert compile_file(deploy, _apply_fix(info.value.issues[0].fix)).cross_process_edges == ()


def test_all_violations_reported_together(ming):
    """Ming: moving reference_encode out breaks both guarded edges; both are reported, each with its reason."""
    error = topology_error(ming, ["--stages.reference_encode.process", "encoder",
                                  "--stages.reference_encode.runtime.resources.total_gpu_memory_fraction", "0.1",
                                  "--stages.tts_engine.runtime.resources.total_gpu_memory_fraction", "0.6",
                                  "--stages.audio_decode.runtime.resources.total_gpu_memory_fraction", "0.2"])
    assert paths(error) == ["stages.reference_encode.process", "stages.reference_encode.process"]
    rules = [i.rule for i in error.issues]
    assert rules[0].startswith(f"the edge preprocessing -> reference_encode must stay inside one OS process ({MING_REASON})")
    assert rules[1].startswith(f"the edge reference_encode -> tts_engine must stay inside one OS process ({MING_REASON})")
    assert {i.fix for i in error.issues} == {"--stages.reference_encode.process pipeline  (or set process: pipeline on reference_encode in your deployment file)"}


def test_violations_on_independent_edges_each_get_their_own_fix():
    stages = chain("a", "b", "c", "d")
    for s in stages:
        s["process"] = "p"
    data = pipeline(stages, process_local_edges=[
        {"src": "a", "dst": "b", "reason": "reason one"},
        {"src": "c", "dst": "d", "reason": "reason two"},
    ])
    error = topology_error(data, ["--stages.a.process", "x", "--stages.d.process", "y"])
    assert [(i.path, _apply_fix(i.fix)) for i in error.issues] == [
        ("stages.a.process", ["--stages.a.process", "p"]),
        ("stages.d.process", ["--stages.d.process", "p"]),
    ]
    assert "(reason one)" in error.issues[0].rule and "(reason two)" in error.issues[1].rule


def test_grouping_keeps_a_shared_handoff_local_while_others_cross(higgs):
    """The spec's per-edge rationale: preprocessing -> audio_encoder local, audio_encoder -> tts_engine may cross."""
    higgs["process_local_edges"] = [{"src": "preprocessing", "dst": "audio_encoder", "reason": "shared handoff"}]
    topology = compiled(higgs)
    assert [(e.src, e.dst) for e in topology.cross_process_edges] == [("audio_encoder", "tts_engine"), ("tts_engine", "vocoder")]
    error = topology_error(higgs, ["--stages.audio_encoder.process", "encoder"])
    assert paths(error) == ["stages.audio_encoder.process"]


def test_contract_applies_to_stream_to_and_wait_for_edges():
    stages = [
        stage("a", next="b", stream_to="c", process="p"),
        stage("b", next="c", process="p"),
        stage("c", terminal=True, process="q"),
    ]
    data = pipeline(stages, process_local_edges=[{"src": "a", "dst": "c", "reason": "streamed state"}])
    issue = only(topology_error(data), "stages.c.process")
    assert "a -> c must stay inside one OS process (streamed state)" in issue.rule


def test_contract_entry_naming_unknown_stages(qwen3):
    qwen3["process_local_edges"].append({"src": "preprocesing", "dst": "tts_engin", "reason": "typo"})
    error = topology_error(qwen3)
    src = only(error, "process_local_edges.preprocesing->tts_engin.src")
    dst = only(error, "process_local_edges.preprocesing->tts_engin.dst")
    assert "would silently disable this guard" in src.rule
    assert "did you mean 'preprocessing'?" in src.fix and src.value == "preprocesing"
    assert "did you mean 'tts_engine'?" in dst.fix and dst.value == "tts_engin"


def test_contract_entry_naming_a_non_edge(qwen3):
    qwen3["process_local_edges"].append({"src": "preprocessing", "dst": "vocoder", "reason": "wrong edge"})
    issue = only(topology_error(qwen3), "process_local_edges.preprocessing->vocoder")
    assert "names an edge that does not exist (edges from preprocessing: preprocessing -> tts_engine)" in issue.rule
    assert issue.value == "preprocessing -> vocoder"


def test_contract_entry_reversed_edge(qwen3):
    qwen3["process_local_edges"] = [{"src": "tts_engine", "dst": "preprocessing", "reason": "backwards"}]
    issue = only(topology_error(qwen3), "process_local_edges.tts_engine->preprocessing")
    assert "edges from tts_engine: tts_engine -> vocoder" in issue.rule


def test_contract_entry_listed_twice(qwen3):
    qwen3["process_local_edges"].append(dict(qwen3["process_local_edges"][0]))
    issue = only(topology_error(qwen3), "process_local_edges.preprocessing->tts_engine")
    assert issue.rule == "the edge is listed twice in the contract"


def test_contract_errors_and_violations_together(qwen3):
    qwen3["process_local_edges"].append({"src": "tts_engine", "dst": "vocodr", "reason": "typo"})
    error = topology_error(qwen3, ["--stages.preprocessing.process", "frontend"])
    assert sorted(paths(error)) == ["process_local_edges.tts_engine->vocodr.dst", "stages.preprocessing.process"]


def test_moss_split_style_every_edge_local(higgs):
    """Every pipeline edge declared local: any split is rejected; one process is accepted."""
    for s in higgs["stages"]:
        s["process"] = "pipeline"
        s.pop("runtime", None)
    higgs["process_local_edges"] = [
        {"src": "preprocessing", "dst": "audio_encoder", "reason": "r1"},
        {"src": "audio_encoder", "dst": "tts_engine", "reason": "r2"},
        {"src": "tts_engine", "dst": "vocoder", "reason": "r3"},
    ]
    assert compiled(higgs).cross_process_edges == ()
    error = topology_error(higgs, ["--stages.vocoder.process", "vocoder", "--stages.preprocessing.process", "front"])
    assert paths(error)[:2] == ["stages.preprocessing.process", "stages.vocoder.process"]
