"""Every model against the spec's table: default topology, process-local contract, splits.

Forbidden splits are checked the way a user meets them, through ``omni-compile
validate`` (exit 1, the model's reason, the one-line fix); allowed splits compile
once the GPU fractions that make the sharing legal are declared.
"""

from __future__ import annotations

import pytest
from e2e_support import (
    MODEL_IDS,
    SPEC,
    SPEC_BY_ID,
    compile_model,
    config_class,
    load,
    omni_compile,
    pipeline_edges,
    split_along,
)

from omni_compiler.splits import fraction_overrides, fully_split_overrides


def _forbidden_cases() -> list[tuple[str, str, str]]:
    return [(spec.model_id, src, dst) for spec in SPEC for (src, dst) in spec.local_edges]


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_default_topology_compiles_with_the_documented_processes(model_id: str) -> None:
    spec = SPEC_BY_ID[model_id]
    topology = compile_model(model_id)
    assert {p.name: tuple(p.stages) for p in topology.processes} == spec.default_processes
    assert {(e.src, e.dst) for e in topology.edges if e.process_local_reason} == set(spec.local_edges)
    assert not any(e.cross_process for e in topology.edges if e.process_local_reason)


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_config_class_returns_the_contract_the_pipeline_file_carries(model_id: str) -> None:
    config = load(model_id)
    from_class = config_class(model_id)().process_local_edges()
    assert [(e.src, e.dst, e.reason) for e in from_class] == [(e.src, e.dst, e.reason) for e in config.process_local_edges]
    for edge in config.process_local_edges:
        assert SPEC_BY_ID[model_id].local_edges[(edge.src, edge.dst)] in edge.reason


@pytest.mark.parametrize(("model_id", "src", "dst"), _forbidden_cases())
def test_forbidden_split_is_rejected_with_the_models_reason(model_id: str, src: str, dst: str) -> None:
    config = load(model_id)
    reason = next(e.reason for e in config.process_local_edges if (e.src, e.dst) == (src, dst))
    src_process = config.stage(src).process or src
    result = omni_compile("validate", model_id, f"--stages.{dst}.process", f"isolated_{dst}", *fraction_overrides(config))
    assert result.returncode == 1, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert f"stages.{dst}.process" in output
    assert f"the edge {src} -> {dst} must stay inside one OS process" in output
    assert reason in output
    assert f"--stages.{dst}.process {src_process}" in output


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_every_other_split_compiles_once_fractions_make_sharing_legal(model_id: str) -> None:
    from omni_compiler import TopologyError

    config = load(model_id)
    fractions = fraction_overrides(config)
    allowed = [edge for edge in pipeline_edges(config) if edge not in SPEC_BY_ID[model_id].local_edges]
    for src, dst in allowed:
        split = split_along(config, src, dst)
        try:
            topology = compile_model(model_id, split + fractions)
        except TopologyError as exc:
            pytest.fail(f"{model_id}: splitting {src} -> {dst} with {split + fractions} was rejected:\n{exc.render()}")
        edge = next(e for e in topology.edges if (e.src, e.dst) == (src, dst))
        assert edge.cross_process, f"{model_id}: {split} left {src} -> {dst} inside one process"
        shared = config.placement.require_memory_fraction_for_colocation and any(
            len(budget.processes) > 1 and any(s.memory_fraction is None for s in config.stages if budget.gpu in s.gpu_ids) for budget in topology.gpus
        )
        if shared:
            # The fractions are what make it legal: the same topology without them is refused.
            with pytest.raises(TopologyError, match="total_gpu_memory_fraction"):
                compile_model(model_id, split)


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_fully_split_topology_keeps_process_local_pairs_together(model_id: str) -> None:
    config = load(model_id)
    topology = compile_model(model_id, fully_split_overrides(config) + fraction_overrides(config))
    for edge in topology.edges:
        assert edge.cross_process == (edge.process_local_reason is None and (edge.src, edge.dst) not in SPEC_BY_ID[model_id].local_edges)


def test_higgs_prints_the_spec_table_and_redeclaring_it_is_a_no_op() -> None:
    model = "bosonai/higgs-tts-3-4b"
    result = omni_compile("validate", model, "--stages.preprocessing.process", "tts_frontend", "--stages.audio_encoder.process", "tts_frontend")
    assert result.returncode == 0, result.stderr
    table = result.stdout.split("\n\n")[0].splitlines()
    assert table == [
        "tts_frontend : preprocessing, audio_encoder",
        "pipeline     : tts_engine",
        "vocoder      : vocoder",
    ]
    redeclared = compile_model(model, ["--stages.preprocessing.process", "tts_frontend", "--stages.vocoder.process", "vocoder"])
    assert redeclared.to_dict() == compile_model(model).to_dict()


def test_higgs_stages_can_be_fully_separated_or_regrouped() -> None:
    model = "bosonai/higgs-tts-3-4b"
    separated = omni_compile("validate", model, "--stages.audio_encoder.process", "audio_encoder")
    assert separated.returncode == 0, separated.stdout + separated.stderr
    assert "audio_encoder : audio_encoder" in separated.stdout
    regrouped = compile_model(
        model, ["--stages.preprocessing.process", "front", "--stages.audio_encoder.process", "front", "--stages.tts_engine.process", "front"]
    )
    assert {p.name: p.stages for p in regrouped.processes} == {"front": ("preprocessing", "audio_encoder", "tts_engine"), "vocoder": ("vocoder",)}


def test_all_forbidden_splits_of_one_model_are_reported_together() -> None:
    model = "inclusionai/ming-omni-tts"
    result = omni_compile("validate", model, "--stages.reference_encode.process", "ref", "--format", "json")
    assert result.returncode == 1
    assert result.stdout.count("must stay inside one OS process") == 2
