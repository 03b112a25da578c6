"""Step 1: stages grouped by `process`, in declaration order; the spec's Higgs table."""

from __future__ import annotations

from compiler_helpers import chain, compiled, only, pipeline, stage, table_rows, topology_error

from omni_compiler import render

HIGGS_TABLE = (
    "tts_frontend : preprocessing, audio_encoder\n"
    "pipeline     : tts_engine\n"
    "vocoder      : vocoder"
)


def test_higgs_table_is_the_spec_table(higgs):
    topology = compiled(higgs)
    assert render.table(topology) == HIGGS_TABLE
    assert table_rows(topology) == [
        ("tts_frontend", ("preprocessing", "audio_encoder")),
        ("pipeline", ("tts_engine",)),
        ("vocoder", ("vocoder",)),
    ]
    assert [i.name for i in topology.instances] == ["tts_frontend", "pipeline", "vocoder"]
    assert all(i.replica is None for i in topology.instances)


def test_spec_redeclaration_is_a_noop(higgs):
    """The spec's `--stages.preprocessing.process tts_frontend --stages.audio_encoder.process tts_frontend`."""
    overridden = compiled(higgs, ["--stages.preprocessing.process", "tts_frontend", "--stages.audio_encoder.process", "tts_frontend"])
    assert overridden == compiled(higgs)
    assert render.table(overridden) == HIGGS_TABLE


def test_process_order_is_first_declaration_order():
    stages = chain("a", "b", "c", "d")
    for s, process in zip(stages, ["z", "y", "z", "x"]):
        s["process"] = process
    topology = compiled(pipeline(stages))
    assert table_rows(topology) == [("z", ("a", "c")), ("y", ("b",)), ("x", ("d",))]
    assert render.table(topology) == "z : a, c\ny : b\nx : d"


def test_stage_without_process_runs_alone_under_its_own_name():
    stages = chain("a", "b", "c")
    stages[0]["process"] = stages[2]["process"] = "shared"
    topology = compiled(pipeline(stages))
    assert table_rows(topology) == [("shared", ("a", "c")), ("b", ("b",))]
    assert topology.stage("b").process == "b"
    assert topology.process("b").declared_process == "b"


def test_fully_separated_and_fully_grouped_higgs(higgs):
    separated = compiled(higgs, [f"--stages.{s}.process={s}" for s in ("preprocessing", "audio_encoder", "tts_engine", "vocoder")])
    assert table_rows(separated) == [(s, (s,)) for s in ("preprocessing", "audio_encoder", "tts_engine", "vocoder")]
    assert len(separated.cross_process_edges) == 3
    grouped = compiled(higgs, [f"--stages.{s}.process=all" for s in ("preprocessing", "audio_encoder", "tts_engine", "vocoder")])
    assert table_rows(grouped) == [("all", ("preprocessing", "audio_encoder", "tts_engine", "vocoder"))]
    assert grouped.cross_process_edges == ()
    assert render.table(grouped) == "all : preprocessing, audio_encoder, tts_engine, vocoder"


def test_vocoder_back_in_the_shared_process(higgs):
    """The spec's second example: `process: pipeline` keeps the vocoder in a shared process."""
    topology = compiled(higgs, ["--stages.vocoder.process", "pipeline"])
    assert render.table(topology) == "tts_frontend : preprocessing, audio_encoder\npipeline     : tts_engine, vocoder"
    assert [(e.src, e.dst) for e in topology.cross_process_edges] == [("audio_encoder", "tts_engine")]


def test_regrouping_under_another_process_name(higgs):
    topology = compiled(higgs, ["--stages.audio_encoder.process", "encoder", "--stages.preprocessing.process", "encoder"])
    assert table_rows(topology)[0] == ("encoder", ("preprocessing", "audio_encoder"))


def test_stage_named_like_another_stages_process_joins_it():
    """A stage with no process runs in a process named after itself, so naming that process joins it."""
    stages = chain("a", "b")
    stages[1]["process"] = "a"
    assert table_rows(compiled(pipeline(stages))) == [("a", ("a", "b"))]


def test_processes_entry_for_a_process_no_stage_uses(higgs):
    error = topology_error(higgs, ["--processes.vocodr.num_replicas", "2"])
    issue = only(error, "processes.vocodr")
    assert issue.rule == "no stage runs in this process"
    assert "did you mean 'vocoder'?" in issue.fix


def test_compiled_stage_records_declared_wiring_and_placement(higgs):
    topology = compiled(higgs)
    engine = topology.stage("tts_engine")
    assert engine.process == "pipeline"
    assert engine.next == ("vocoder",) and engine.stream_to == ("vocoder",) and engine.wait_for == ()
    assert engine.gpu == (0,) and engine.tp_size == 1 and engine.memory_fraction == 0.85
    assert engine.factory == "omni_models.higgs_tts.stages:build_tts_engine"
    assert engine.factory_args == {"max_batch_size": 8, "dtype": "bfloat16"}
    assert topology.stage("vocoder").env == {"OMNI_VOCODER_CHUNK": "2048"}
    assert topology.entry_stage == "preprocessing" and topology.name == "bosonai/higgs-tts-3-4b"


def test_single_stage_pipeline():
    topology = compiled(pipeline([stage("only", terminal=True)]))
    assert render.table(topology) == "only : only"
    assert topology.edges == ()
