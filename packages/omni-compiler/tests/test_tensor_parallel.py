"""Step 2: a TP stage owns one OS process per rank, `<process>_tp<rank>`; its edges cross processes."""

from __future__ import annotations

from compiler_helpers import chain, compiled, instance_gpus, only, paths, pipeline, stage, table_rows, topology_error

from omni_compiler import render


def _tp_higgs(higgs, *extra):
    return compiled(higgs, ["--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1", *extra])


def test_tp_stage_gets_one_process_per_rank(higgs):
    topology = _tp_higgs(higgs)
    assert table_rows(topology) == [
        ("tts_frontend", ("preprocessing", "audio_encoder")),
        ("pipeline_tp0", ("tts_engine",)),
        ("pipeline_tp1", ("tts_engine",)),
        ("vocoder", ("vocoder",)),
    ]
    ranks = [(p.name, p.declared_process, p.tp_rank, p.tp_size) for p in topology.processes if p.tp_rank is not None]
    assert ranks == [("pipeline_tp0", "pipeline", 0, 2), ("pipeline_tp1", "pipeline", 1, 2)]
    assert topology.processes_of("tts_engine") == ("pipeline_tp0", "pipeline_tp1")
    assert instance_gpus(topology)["pipeline_tp0"] == {"tts_engine[tp0]": 0}
    assert instance_gpus(topology)["pipeline_tp1"] == {"tts_engine[tp1]": 1}


def test_tp_table_says_so(higgs):
    assert render.table(_tp_higgs(higgs)) == (
        "tts_frontend : preprocessing, audio_encoder\n"
        "pipeline_tp0 : tts_engine (tp rank 0 of 2)\n"
        "pipeline_tp1 : tts_engine (tp rank 1 of 2)\n"
        "vocoder      : vocoder"
    )


def test_other_stages_keep_the_shared_process_name_and_edges_become_cross_process(higgs):
    """tts_engine and vocoder share `pipeline`; TP moves tts_engine out, vocoder keeps the name."""
    topology = compiled(higgs, [
        "--stages.vocoder.process", "pipeline",
        "--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "[1,2]",
        "--stages.vocoder.gpu", "3",
    ])
    assert table_rows(topology) == [
        ("tts_frontend", ("preprocessing", "audio_encoder")),
        ("pipeline", ("vocoder",)),
        ("pipeline_tp0", ("tts_engine",)),
        ("pipeline_tp1", ("tts_engine",)),
    ]
    edge = next(e for e in topology.edges if (e.src, e.dst) == ("tts_engine", "vocoder"))
    assert edge.cross_process is True
    assert edge.kinds == ("next", "stream_to")


def test_tp_stage_alone_in_a_process_has_only_rank_processes():
    stages = chain("a", "b")
    stages[0].update(tp_size=4, gpu=[0, 1, 2, 3])
    topology = compiled(pipeline(stages))
    assert [p.name for p in topology.processes] == ["a_tp0", "a_tp1", "a_tp2", "a_tp3", "b"]
    assert [i.name for i in topology.instances] == ["a_tp0", "a_tp1", "a_tp2", "a_tp3", "b"]


def test_cpu_tp_stage_without_gpu_is_allowed():
    stages = chain("a", "b")
    stages[1]["tp_size"] = 2
    topology = compiled(pipeline(stages))
    assert [p.name for p in topology.processes] == ["a", "b_tp0", "b_tp1"]
    assert topology.gpus == ()


def test_process_local_edge_broken_by_tp(qwen3):
    """Qwen3 keeps preprocessing -> tts_engine local; TP would put tts_engine in its own processes."""
    error = topology_error(qwen3, [
        "--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1",
        "--stages.tts_engine.runtime.resources.total_gpu_memory_fraction", "0.5",
        "--stages.vocoder.runtime.resources.total_gpu_memory_fraction", "0.2",
    ])
    assert paths(error) == ["stages.tts_engine.tp_size"]
    issue = error.issues[0]
    assert issue.value == 2
    assert "the edge preprocessing -> tts_engine must stay inside one OS process" in issue.rule
    assert "_PREPARED_REQUESTS" in issue.rule  # the model's reason
    assert "TP rank processes 'pipeline_tp0', 'pipeline_tp1'" in issue.rule
    assert "tensor parallelism gives tts_engine its own process per rank" in issue.rule
    assert issue.fix.startswith("--stages.tts_engine.tp_size 1")


def test_tp_on_the_source_of_a_process_local_edge(qwen3):
    qwen3["stages"][0]["gpu"] = [0, 1]
    qwen3["stages"][0]["tp_size"] = 2
    qwen3["stages"][0]["runtime"] = {"resources": {"total_gpu_memory_fraction": 0.1}}
    qwen3["stages"][1]["runtime"] = {"resources": {"total_gpu_memory_fraction": 0.5}}
    qwen3["stages"][2]["runtime"] = {"resources": {"total_gpu_memory_fraction": 0.2}}
    error = topology_error(qwen3)
    assert paths(error) == ["stages.preprocessing.tp_size"]


def test_tp_edges_not_in_the_contract_are_fine(higgs):
    topology = _tp_higgs(higgs)
    crossing = {(e.src, e.dst) for e in topology.cross_process_edges}
    assert crossing == {("audio_encoder", "tts_engine"), ("tts_engine", "vocoder")}


def test_two_tp_stages_in_one_process_collide():
    stages = chain("a", "b", "c")
    for s in stages[:2]:
        s.update(process="p", tp_size=2)
    error = topology_error(pipeline(stages))
    issue = only(error, "stages.b.process")
    assert "'p_tp<rank>' would collide" in issue.rule
    assert issue.fix == "give b its own process: --stages.b.process b"
    assert issue.value == "p"


def test_rank_process_name_already_declared():
    stages = chain("a", "b", "c")
    stages[0].update(process="p", tp_size=2)
    stages[1]["process"] = "p_tp1"
    error = topology_error(pipeline(stages))
    issue = only(error, "stages.a.tp_size")
    assert "'p_tp1', which is already a declared process" in issue.rule
    assert issue.value == 2


def test_gpu_list_length_must_match_tp_size(higgs):
    error = topology_error(higgs, ["--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1,2"])
    issue = only(error, "stages.tts_engine.gpu")
    assert "3 id(s) for tp_size 2" in issue.rule
    assert issue.fix == "give 2 GPU id(s), e.g. --stages.tts_engine.gpu 0,1"
    assert issue.value == [0, 1, 2]


def test_gpu_list_for_a_non_tp_stage(higgs):
    issue = only(topology_error(higgs, ["--stages.vocoder.gpu", "0,1"]), "stages.vocoder.gpu")
    assert "2 id(s) for tp_size 1" in issue.rule
    assert issue.fix == "give one id: --stages.vocoder.gpu 0"


def test_tp_with_a_stage_of_the_same_process_on_the_same_gpu_needs_fractions():
    """Rank 0 on GPU 0 shares it with the plain stage of the same declared process: two OS processes."""
    stages = [stage("a", next="b", process="p", gpu=0), stage("b", terminal=True, process="p", gpu=[0, 1], tp_size=2)]
    error = topology_error(pipeline(stages))
    assert sorted(paths(error)) == ["stages.a.runtime.resources.total_gpu_memory_fraction", "stages.b.runtime.resources.total_gpu_memory_fraction"]
    assert "GPU 0 is shared by OS processes p, p_tp0" in error.issues[0].rule


def test_colliding_tp_stages_with_a_contract_edge_are_reported_not_crashed():
    """Regression (found by hypothesis): the second TP stage has no rank process; the contract check must not crash."""
    stages = chain("a", "b")
    for s in stages:
        s.update(process="p", tp_size=2)
    data = pipeline(stages, process_local_edges=[{"src": "a", "dst": "b", "reason": "shared state"}])
    error = topology_error(data)
    assert paths(error) == ["stages.b.process"]
