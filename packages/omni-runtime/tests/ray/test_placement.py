"""What each instance asks Ray for, and how the config's GPU ids map onto Ray's devices.

Pure functions of the compiled topology: they run without Ray and without GPUs
(the GPU paths of the Ray backend cannot be exercised on a CPU-only machine, so
the rules that decide them are pinned here).
"""

from __future__ import annotations

import pytest

from omni_compiler import compile as compile_topology
from omni_config import raw_config
from omni_runtime.raycluster.placement import BUNDLE_MIN_CPU, logical_gpu_map, plan, remap_gpus


def _topology(stages, processes=None, **placement):
    data = {"name": "t", "stages": stages, "process_local_edges": []}
    if processes:
        data["processes"] = processes
    if placement:
        data["placement"] = placement
    return compile_topology(raw_config(data))


def _chain(*specs):
    stages = []
    for index, (name, fields) in enumerate(specs):
        stage = {"name": name, "factory": "m:f", **fields}
        if index + 1 < len(specs):
            stage["next"] = specs[index + 1][0]
        else:
            stage["terminal"] = True
        stages.append(stage)
    return stages


def test_cpu_instances_ask_for_nothing_but_their_placement():
    topology = _topology(_chain(("a", {"process": "front"}), ("b", {"process": "voc"})), {"voc": {"ray": {"resources": {"node_b": 1}, "num_cpus": 0.5}}})
    ray_plan = plan(topology, cpu_only=False)
    front, voc = ray_plan.actor("front"), ray_plan.actor("voc")
    assert (front.num_cpus, front.num_gpus, front.resources, front.group) == (0.0, 0.0, {}, None)
    assert (voc.num_cpus, voc.num_gpus, voc.resources) == (0.5, 0.0, {"node_b": 1.0})
    assert ray_plan.groups == ()


def test_an_instance_owning_its_gpu_asks_for_a_whole_one():
    topology = _topology(_chain(("a", {"process": "p", "gpu": 0}), ("b", {"process": "q", "gpu": 1})))
    assert [plan(topology, cpu_only=False).actor(n).num_gpus for n in ("p", "q")] == [1.0, 1.0]


def test_instances_sharing_a_gpu_ask_for_the_sum_of_their_fractions():
    stages = _chain(
        ("pre", {"process": "front", "gpu": 0, "runtime": {"resources": {"total_gpu_memory_fraction": 0.03}}}),
        ("enc", {"process": "front", "gpu": 0, "runtime": {"resources": {"total_gpu_memory_fraction": 0.02}}}),
        ("eng", {"process": "engine", "gpu": 0, "runtime": {"resources": {"total_gpu_memory_fraction": 0.85}}}),
    )
    ray_plan = plan(_topology(stages), cpu_only=False)
    assert ray_plan.actor("front").num_gpus == pytest.approx(0.05)
    assert ray_plan.actor("engine").num_gpus == pytest.approx(0.85)
    assert ray_plan.actor("front").logical_gpus == (0,)


def test_device_cpu_asks_for_no_gpu():
    topology = _topology(_chain(("a", {"process": "p", "gpu": 0}), ("b", {"process": "q", "gpu": 1})))
    assert [plan(topology, cpu_only=True).actor(n).num_gpus for n in ("p", "q")] == [0.0, 0.0]


def test_tp_ranks_of_a_stage_are_one_strict_pack_group_per_replica():
    fraction = {"runtime": {"resources": {"total_gpu_memory_fraction": 0.9}}}
    stages = _chain(("pre", {"process": "front"}), ("eng", {"process": "engine", "tp_size": 2, "gpu": [0, 1], **fraction}))
    processes = {"engine": {"num_replicas": 2, "replica_devices": [0, 1, 2, 3], "ray": {"resources": {"gpu_box": 1}, "label_selector": {"zone": "a"}}}}
    ray_plan = plan(_topology(stages, processes), cpu_only=False)
    groups = {g.key: g for g in ray_plan.groups}
    assert sorted(groups) == ["engine@r0", "engine@r1"]
    assert groups["engine@r0"].bundles == ({"CPU": BUNDLE_MIN_CPU, "gpu_box": 1.0, "GPU": 0.9},) * 2
    assert groups["engine@r0"].label_selector == {"zone": "a"}
    ranks = [a for a in ray_plan.actors if a.group == "engine@r1"]
    assert [(a.instance, a.bundle_index, a.logical_gpus) for a in ranks] == [("engine_tp0@r1", 0, (2,)), ("engine_tp1@r1", 1, (3,))]


def test_cpu_only_tp_ranks_still_get_non_empty_bundles():
    stages = _chain(("pre", {"process": "front"}), ("eng", {"process": "engine", "tp_size": 2}))
    (group,) = plan(_topology(stages), cpu_only=True).groups
    assert group.bundles == ({"CPU": BUNDLE_MIN_CPU},) * 2


def test_logical_gpus_map_onto_rays_devices_in_order():
    # Ray assigned physical GPUs 5 and 2 (CUDA_VISIBLE_DEVICES=5,2): the instance's logical 0 and 1 are cuda:0 and cuda:1
    assert logical_gpu_map((0, 1), ["5", "2"]) == {0: 0, 1: 1}
    assert logical_gpu_map((3, 7), ["0", "1"]) == {3: 0, 7: 1}
    # a fractional share is one device, whatever its logical id
    assert logical_gpu_map((2,), ["6"]) == {2: 0}
    assert logical_gpu_map((), []) == {}


def test_fewer_devices_than_declared_is_an_error_not_a_silent_overlap():
    with pytest.raises(RuntimeError, match=r"declares GPUs \[0, 1, 2\] but Ray assigned only \['4', '5'\]"):
        logical_gpu_map((0, 1, 2), ["4", "5"])
    with pytest.raises(RuntimeError, match="assigned it none"):
        logical_gpu_map((0,), [])


def test_remap_rewrites_only_that_instances_stage_gpus():
    stages = _chain(("a", {"process": "p", "gpu": 3}), ("b", {"process": "q", "gpu": 7}))
    topology = _topology(stages)
    remapped = remap_gpus(topology, "q", {7: 0})
    gpus = {i.name: [s.gpu for s in i.stages] for i in remapped.instances}
    assert gpus == {"p": [3], "q": [0]}
    assert remap_gpus(topology, "q", {}) is topology
