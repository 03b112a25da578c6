"""Step 7: GPU memory fractions (colocation, opt-out, replica_devices, per-GPU limit) and GPU counts."""

from __future__ import annotations

import pytest
from compiler_helpers import compile_error, compiled, only, paths, pipeline, stage, topology_error

from omni_compiler import GpuBudget, GpuShare

FRACTION = "runtime.resources.total_gpu_memory_fraction"
OPT_OUT = {"require_memory_fraction_for_colocation": False}


def _two(process_a="p", process_b="q", gpu_a=0, gpu_b=0, frac_a=None, frac_b=None, **top):
    return pipeline([
        stage("a", next="b", process=process_a, gpu=gpu_a, fraction=frac_a),
        stage("b", terminal=True, process=process_b, gpu=gpu_b, fraction=frac_b),
    ], **top)


def test_higgs_budget_table_values(higgs):
    topology = compiled(higgs)
    assert topology.gpus == (GpuBudget(0, (
        GpuShare("tts_frontend", "audio_encoder", None, 0.03),
        GpuShare("pipeline", "tts_engine", None, 0.85),
        GpuShare("vocoder", "vocoder", None, 0.10),
    ), 1.0),)
    assert topology.gpus[0].total == 0.98
    assert topology.gpus[0].processes == ("tts_frontend", "pipeline", "vocoder")


def test_fractions_are_never_inferred_or_rewritten(higgs):
    """The compiled topology carries each stage's fraction exactly as declared (None stays None)."""
    higgs["stages"][3]["gpu"] = 1
    del higgs["stages"][3]["runtime"]
    topology = compiled(higgs)
    assert [s.memory_fraction for s in topology.stages] == [None, 0.03, 0.85, None]
    placed = {p.stage: p.memory_fraction for i in topology.instances for p in i.stages}
    assert placed == {"preprocessing": None, "audio_encoder": 0.03, "tts_engine": 0.85, "vocoder": None}
    assert topology.gpus[1].shares == (GpuShare("vocoder", "vocoder", None, None),)


def test_same_process_same_gpu_never_needs_fractions():
    assert compiled(_two(process_b="p")).gpus[0].total == 0


def test_colocation_across_processes_needs_every_fraction():
    error = topology_error(_two(frac_a=0.5))
    issue = only(error, f"stages.b.{FRACTION}")
    assert issue.rule == "GPU 0 is shared by OS processes p, q; every GPU stage on a shared GPU must declare its memory fraction"
    assert issue.fix == f"declare it: --stages.b.{FRACTION} <fraction> (fractions on one GPU must sum to <= 1)"
    assert len(error.issues) == 1


def test_colocation_with_both_fractions_is_valid():
    topology = compiled(_two(frac_a=0.5, frac_b=0.5))
    assert topology.gpus[0].total == 1.0


def test_different_gpus_need_no_fractions():
    assert [g.gpu for g in compiled(_two(gpu_b=1)).gpus] == [0, 1]


def test_cpu_stage_sharing_a_process_with_gpu_stages_needs_no_fraction(higgs):
    """preprocessing (CPU) lives in tts_frontend with audio_encoder; only GPU stages are accounted."""
    shares = [s.stage for s in compiled(higgs).gpus[0].shares]
    assert "preprocessing" not in shares


def test_opt_out_applies_when_stage_gpu_alone_declares_the_sharing():
    topology = compiled(_two(placement=OPT_OUT))
    assert topology.gpus[0].processes == ("p", "q")


def test_opt_out_does_not_apply_when_replica_devices_takes_part():
    error = topology_error(_two(gpu_b=1, frac_b=0.3, placement=OPT_OUT), ["--processes.q.replica_devices", "0"])
    issue = only(error, f"stages.a.{FRACTION}")
    assert "GPU 0 is shared by OS processes p, q" in issue.rule
    assert "require_memory_fraction_for_colocation: false does not apply: replica_devices takes part in this sharing" in issue.rule


def test_replica_devices_always_require_fractions_with_one_replica_alone():
    error = topology_error(_two(gpu_b=1, placement=OPT_OUT), ["--processes.q.replica_devices", "2"])
    issue = only(error, f"stages.b.{FRACTION}")
    assert "placed by processes.q.replica_devices" in issue.rule and "num_replicas: 1 included" in issue.rule


def test_replica_devices_with_fraction_is_valid():
    topology = compiled(_two(gpu_b=1, frac_b=0.2), ["--processes.q.replica_devices", "2"])
    assert [(g.gpu, g.processes) for g in topology.gpus] == [(0, ("p",)), (2, ("q",))]


def test_per_gpu_limit_counts_explicit_fractions_of_a_single_process():
    """One process, two stages on GPU 0 that need no fractions, but declare 0.6 + 0.5: over the limit."""
    error = topology_error(_two(process_b="p", frac_a=0.6, frac_b=0.5))
    issue = only(error, "placement.max_total_gpu_memory_fraction_per_gpu")
    assert issue.rule == "GPU 0: declared memory fractions sum to 1.1 (p/a 0.6, p/b 0.5), over the per-GPU limit 1"
    assert issue.value == 1.0


def test_per_gpu_limit_with_a_partial_declaration():
    error = topology_error(_two(process_b="p", frac_a=0.9), ["--placement.max_total_gpu_memory_fraction_per_gpu", "0.8"])
    issue = only(error, "placement.max_total_gpu_memory_fraction_per_gpu")
    assert "sum to 0.9 (p/a 0.9), over the per-GPU limit 0.8" in issue.rule


def test_limit_is_inclusive():
    topology = compiled(_two(frac_a=0.45, frac_b=0.45), ["--placement.max_total_gpu_memory_fraction_per_gpu", "0.9"])
    assert topology.gpus[0].total == 0.9 and topology.gpus[0].limit == 0.9


def test_float_sums_do_not_trip_the_limit():
    stages = [stage(f"s{i}", process=f"p{i}", gpu=0, fraction=0.1, **({"next": f"s{i + 1}"} if i < 9 else {"terminal": True})) for i in range(10)]
    assert compiled(pipeline(stages)).gpus[0].total == 1.0


def test_opt_out_still_enforces_the_limit():
    error = topology_error(_two(frac_a=0.7, frac_b=0.7, placement=OPT_OUT))
    assert paths(error) == ["placement.max_total_gpu_memory_fraction_per_gpu"]


def test_tp_ranks_each_count_toward_the_limit():
    stages = [stage("a", next="b", tp_size=2, gpu=[0, 0], fraction=0.6), stage("b", terminal=True)]
    error = topology_error(pipeline(stages))
    assert "sum to 1.2 (a_tp0/a[tp0] 0.6, a_tp1/a[tp1] 0.6)" in only(error, "placement.max_total_gpu_memory_fraction_per_gpu").rule


def test_tp_ranks_sharing_a_gpu_need_fractions():
    stages = [stage("a", next="b", tp_size=2, gpu=[0, 0]), stage("b", terminal=True)]
    issue = only(topology_error(pipeline(stages)), f"stages.a.{FRACTION}")
    assert "GPU 0 is shared by OS processes a_tp0, a_tp1" in issue.rule
    assert compiled(pipeline(stages), ["--placement.require_memory_fraction_for_colocation", "false"]).gpus[0].processes == ("a_tp0", "a_tp1")


def test_each_missing_fraction_reported_once_per_stage(higgs):
    for s in higgs["stages"]:
        s.pop("runtime", None)
    error = topology_error(higgs)
    assert sorted(paths(error)) == [f"stages.{s}.{FRACTION}" for s in ("audio_encoder", "tts_engine", "vocoder")]


def test_budget_lists_replica_instances(higgs):
    topology = compiled(higgs, ["--processes.vocoder.num_replicas", "2", "--processes.vocoder.replica_devices", "1,1"])
    assert topology.gpus[1] == GpuBudget(1, (GpuShare("vocoder@r0", "vocoder", None, 0.1), GpuShare("vocoder@r1", "vocoder", None, 0.1)), 1.0)


# --- GPU counts: --gpus N and placement.num_gpus ---------------------------------------------

def test_num_gpus_checks_stage_gpu_ids(higgs):
    error = topology_error(higgs, ["--stages.vocoder.gpu", "2"], num_gpus=2)
    issue = only(error, "stages.vocoder.gpu")
    assert issue.rule == "GPU 2 does not exist on a machine with 2 GPU(s)"
    assert issue.fix == "use a GPU id below 2 (valid ids are 0..1)"


def test_num_gpus_checks_tp_gpu_lists(higgs):
    error = topology_error(higgs, ["--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,3"], num_gpus=2)
    assert only(error, "stages.tts_engine.gpu").value == [0, 3]


def test_num_gpus_checks_replica_devices(higgs):
    error = topology_error(higgs, ["--processes.vocoder.num_replicas", "2", "--processes.vocoder.replica_devices", "1,2"], num_gpus=2)
    issue = only(error, "processes.vocoder.replica_devices")
    assert issue.rule == "GPU(s) [2] do not exist on a machine with 2 GPU(s)"


def test_placement_num_gpus_is_used_when_no_count_is_given(higgs):
    error = topology_error(higgs, ["--placement.num_gpus", "1", "--stages.vocoder.gpu", "1"])
    assert paths(error) == ["stages.vocoder.gpu"]
    assert compiled(higgs, ["--placement.num_gpus", "1"]).num_gpus == 1


def test_explicit_count_overrides_placement_num_gpus(higgs):
    topology = compiled(higgs, ["--placement.num_gpus", "1", "--stages.vocoder.gpu", "1"], num_gpus=2)
    assert topology.num_gpus == 2


def test_without_a_count_any_id_is_accepted(higgs):
    topology = compiled(higgs, ["--stages.vocoder.gpu", "63"])
    assert topology.num_gpus is None and [g.gpu for g in topology.gpus] == [0, 63]


@pytest.mark.parametrize("count", [0, -1])
def test_device_count_must_be_positive(higgs, count):
    issue = only(topology_error(higgs, num_gpus=count), "--gpus")
    assert issue.value == count


def test_gpu_count_checks_replica_devices_not_the_declared_gpu_they_replace():
    """replica_devices moves the process, so only its ids are checked against --gpus."""
    data = pipeline([
        stage("a", next="b", process="p"),
        stage("b", terminal=True, process="voc", gpu=7, fraction=0.2),
    ], processes={"voc": {"num_replicas": 2, "replica_devices": [0, 1]}})
    topology = compiled(data, num_gpus=2)
    assert [(i.name, i.gpus) for i in topology.instances if i.process == "voc"] == [("voc@r0", (0,)), ("voc@r1", (1,))]
    error = compile_error(data, ["--processes.voc.replica_devices", "1,2"], num_gpus=2)
    assert [issue.path for issue in error.issues] == ["processes.voc.replica_devices"]
