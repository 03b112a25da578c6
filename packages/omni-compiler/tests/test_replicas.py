"""Step 3: replicas copy a whole process; every `replica_devices` rule."""

from __future__ import annotations

import pytest
from compiler_helpers import chain, compiled, instance_gpus, only, paths, pipeline, topology_error

from omni_compiler import render

SPEC_REPLICAS = ["--processes.vocoder.num_replicas", "2", "--processes.vocoder.replica_devices", "1,2"]


def test_spec_vocoder_replicas_on_gpus_1_and_2(higgs):
    topology = compiled(higgs, SPEC_REPLICAS)
    assert [i.name for i in topology.instances] == ["tts_frontend", "pipeline", "vocoder@r0", "vocoder@r1"]
    assert [(i.process, i.replica) for i in topology.instances_of("vocoder")] == [("vocoder", 0), ("vocoder", 1)]
    assert instance_gpus(topology)["vocoder@r0"] == {"vocoder@r0": 1}
    assert instance_gpus(topology)["vocoder@r1"] == {"vocoder@r1": 2}
    process = topology.process("vocoder")
    assert (process.num_replicas, process.replicated_by) == (2, "vocoder")
    # the logical table is unchanged; replicas are listed after it
    assert render.table(topology).splitlines()[2] == "vocoder      : vocoder"
    assert "  vocoder: 2 replica(s) -> vocoder@r0 (GPU 1), vocoder@r1 (GPU 2)" in render.text(topology)


def test_replica_copies_every_member_of_the_process(higgs):
    topology = compiled(higgs, [
        "--processes.tts_frontend.num_replicas", "3", "--processes.tts_frontend.replica_devices", "0,1,2",
    ])
    frontends = topology.instances_of("tts_frontend")
    assert [i.name for i in frontends] == ["tts_frontend@r0", "tts_frontend@r1", "tts_frontend@r2"]
    for index, instance in enumerate(frontends):
        assert [p.stage for p in instance.stages] == ["preprocessing", "audio_encoder"]
        assert [p.instance_stage for p in instance.stages] == [f"preprocessing@r{index}", f"audio_encoder@r{index}"]
        # the CPU stage stays on the CPU; the GPU stage follows replica_devices
        assert [p.gpu for p in instance.stages] == [None, index]


def test_cpu_only_process_replicates_without_devices():
    stages = chain("front", "back")
    topology = compiled(pipeline(stages), ["--processes.front.num_replicas", "2"])
    assert [i.name for i in topology.instances] == ["front@r0", "front@r1", "back"]
    assert all(p.gpu is None for i in topology.instances for p in i.stages)


def test_replica_devices_required_for_a_replicated_gpu_process(higgs):
    error = topology_error(higgs, ["--processes.vocoder.num_replicas", "3"])
    issue = only(error, "processes.vocoder.replica_devices")
    assert "num_replicas 3" in issue.rule and "need replica_devices" in issue.rule
    assert issue.fix == "--processes.vocoder.replica_devices 0,1,2"


def test_replica_devices_forbidden_for_a_cpu_only_process(higgs):
    error = topology_error(higgs, ["--processes.tts_frontend.num_replicas", "1", "--stages.audio_encoder.process", "enc",
                                   "--processes.tts_frontend.replica_devices", "1"])
    issue = only(error, "processes.tts_frontend.replica_devices")
    assert "has no GPU stage" in issue.rule
    assert issue.value == [1]
    assert "remove processes.tts_frontend.replica_devices" in issue.fix


@pytest.mark.parametrize("devices", ["1", "1,2,3"])
def test_replica_devices_count_is_num_replicas_times_tp_size(higgs, devices):
    error = topology_error(higgs, ["--processes.vocoder.num_replicas", "2", "--processes.vocoder.replica_devices", devices])
    issue = only(error, "processes.vocoder.replica_devices")
    assert "2 x 1 = 2 GPU ids" in issue.rule
    assert issue.fix == "give exactly 2 ids, one consecutive group of 1 per replica"


def test_replica_devices_count_with_tp(higgs):
    base = ["--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1", "--processes.pipeline.num_replicas", "2"]
    issue = only(topology_error(higgs, [*base, "--processes.pipeline.replica_devices", "0,1,2"]), "processes.pipeline.replica_devices")
    assert "2 x 2 = 4 GPU ids, got 3" in issue.rule


def test_replica_devices_consecutive_groups_per_replica_with_tp(higgs):
    topology = compiled(higgs, [
        "--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1",
        "--processes.pipeline.num_replicas", "2", "--processes.pipeline.replica_devices", "4,5,6,7",
    ])
    gpus = instance_gpus(topology)
    assert gpus["pipeline_tp0@r0"] == {"tts_engine@r0[tp0]": 4}
    assert gpus["pipeline_tp1@r0"] == {"tts_engine@r0[tp1]": 5}
    assert gpus["pipeline_tp0@r1"] == {"tts_engine@r1[tp0]": 6}
    assert gpus["pipeline_tp1@r1"] == {"tts_engine@r1[tp1]": 7}
    assert [i.name for i in topology.instances] == [
        "tts_frontend", "pipeline_tp0@r0", "pipeline_tp0@r1", "pipeline_tp1@r0", "pipeline_tp1@r1", "vocoder",
    ]


def test_ids_unique_inside_a_group(higgs):
    error = topology_error(higgs, [
        "--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1",
        "--processes.pipeline.num_replicas", "2", "--processes.pipeline.replica_devices", "1,1,2,3",
    ])
    issue = only(error, "processes.pipeline.replica_devices")
    assert "replica 0 repeats a GPU inside its group [1, 1]" in issue.rule


def test_ids_may_repeat_across_groups():
    """Two replicas of a TP process on the same pair of GPUs: allowed (with fractions)."""
    stages = chain("a", "b")
    stages[0].update(tp_size=2, gpu=[0, 1], runtime={"resources": {"total_gpu_memory_fraction": 0.4}})
    topology = compiled(pipeline(stages), ["--processes.a.num_replicas", "2", "--processes.a.replica_devices", "2,3,2,3"])
    gpus = instance_gpus(topology)
    assert gpus["a_tp0@r0"] == {"a@r0[tp0]": 2} and gpus["a_tp1@r0"] == {"a@r0[tp1]": 3}
    assert gpus["a_tp0@r1"] == {"a@r1[tp0]": 2} and gpus["a_tp1@r1"] == {"a@r1[tp1]": 3}
    assert [g.gpu for g in topology.gpus] == [2, 3]
    assert [g.total for g in topology.gpus] == [0.8, 0.8]


def test_num_replicas_one_still_moves_the_process(higgs):
    topology = compiled(higgs, ["--processes.vocoder.replica_devices", "3"])
    (vocoder,) = topology.instances_of("vocoder")
    assert vocoder.name == "vocoder" and vocoder.replica is None
    assert [(p.instance_stage, p.gpu) for p in vocoder.stages] == [("vocoder", 3)]
    assert [g.gpu for g in topology.gpus] == [0, 3]
    assert "  vocoder: 1 replica(s) -> vocoder (GPU 3)" in render.text(topology)


def test_replica_devices_needs_fractions_even_with_one_replica_alone_on_its_gpu(higgs):
    del higgs["stages"][3]["runtime"]
    error = topology_error(higgs, ["--processes.vocoder.replica_devices", "3"])
    issue = only(error, "stages.vocoder.runtime.resources.total_gpu_memory_fraction")
    assert "placed by processes.vocoder.replica_devices" in issue.rule
    assert "num_replicas: 1 included" in issue.rule
    assert issue.fix.startswith("declare it: --stages.vocoder.runtime.resources.total_gpu_memory_fraction <fraction>")


def test_replicas_share_a_gpu_count_against_the_limit(higgs):
    error = topology_error(higgs, ["--processes.vocoder.num_replicas", "2", "--processes.vocoder.replica_devices", "0,0"])
    issue = only(error, "placement.max_total_gpu_memory_fraction_per_gpu")
    assert "GPU 0: declared memory fractions sum to 1.08" in issue.rule
    assert "vocoder@r0/vocoder 0.1, vocoder@r1/vocoder 0.1" in issue.rule


def test_replicas_and_contract_inside_a_replica_stay_local(qwen3):
    """Replicating the whole Qwen3 process keeps preprocessing -> tts_engine inside each replica."""
    qwen3["stages"][1]["runtime"] = {"resources": {"total_gpu_memory_fraction": 0.6}}
    qwen3["stages"][2]["runtime"] = {"resources": {"total_gpu_memory_fraction": 0.3}}
    topology = compiled(qwen3, ["--processes.pipeline.num_replicas", "2", "--processes.pipeline.replica_devices", "0,1"])
    assert topology.cross_process_edges == ()
    assert [[p.instance_stage for p in i.stages] for i in topology.instances] == [
        ["preprocessing@r0", "tts_engine@r0", "vocoder@r0"],
        ["preprocessing@r1", "tts_engine@r1", "vocoder@r1"],
    ]


def test_replica_errors_all_at_once(higgs):
    error = topology_error(higgs, [
        "--processes.vocoder.num_replicas", "2", "--stages.vocoder.runtime.resources.total_gpu_memory_fraction", "0.05",
        "--stages.tts_engine.runtime.resources.total_gpu_memory_fraction", "0.4",
        "--processes.pipeline.num_replicas", "2", "--processes.pipeline.replica_devices", "1",
        "--processes.ghost.num_replicas", "2",
    ])
    assert sorted(paths(error)) == ["processes.ghost", "processes.pipeline.replica_devices", "processes.vocoder.replica_devices"]


def test_reserved_replica_suffix_cannot_be_declared(higgs):
    from omni_config import ConfigError

    with pytest.raises(ConfigError) as info:
        compiled(higgs, ["--stages.vocoder.process", "vocoder@r0"])
    assert paths(info.value) == ["stages.vocoder.process"]
    assert "'@r<digits>' is reserved" in info.value.issues[0].rule
