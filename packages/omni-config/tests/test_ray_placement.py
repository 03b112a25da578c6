"""``processes.<P>.ray``: where the Ray backend places a process (resources, num_cpus, label_selector)."""

from __future__ import annotations

import pytest
from config_helpers import issues_by_path, raises_config_error

from omni_config import load_config


def test_deployment_file_sets_ray_placement(model_dir, write):
    deploy = write("deploy.yaml", """\
        extends: models/higgs_tts.yaml
        processes:
          vocoder:
            ray:
              resources: {node_b: 1}
              num_cpus: 0.5
              label_selector: {ray.io/accelerator-type: H100, zone: "in(a,b)"}
        """)
    ray = load_config(deploy).processes["vocoder"].ray
    assert ray.resources == {"node_b": 1.0}
    assert ray.num_cpus == 0.5
    assert ray.label_selector == {"ray.io/accelerator-type": "H100", "zone": "in(a,b)"}


def test_cli_sets_one_resource_key_and_num_cpus(model_dir):
    config = load_config(model_dir / "higgs_tts.yaml", ["--processes.vocoder.ray.resources.node_b", "1", "--processes.vocoder.ray.num_cpus", "0.25"])
    assert config.processes["vocoder"].ray.resources == {"node_b": 1.0}
    assert config.processes["vocoder"].ray.num_cpus == 0.25
    assert config.processes["vocoder"].num_replicas == 1


def test_cli_and_file_merge_per_key(model_dir, write):
    deploy = write("deploy.yaml", """\
        extends: models/higgs_tts.yaml
        processes:
          vocoder: {ray: {resources: {node_b: 1}}}
        """)
    config = load_config(deploy, ["--processes.vocoder.ray.resources.gpu_box", "0.5"])
    assert config.processes["vocoder"].ray.resources == {"node_b": 1.0, "gpu_box": 0.5}


def test_unset_ray_placement_is_empty(model_dir):
    ray = load_config(model_dir / "higgs_tts.yaml", ["--processes.vocoder.num_replicas", "1"]).processes["vocoder"].ray
    assert (ray.resources, ray.num_cpus, ray.label_selector) == ({}, None, {})


@pytest.mark.parametrize(
    ("yaml_ray", "path", "rule"),
    [
        ("{resources: {GPU: 1}}", "processes.vocoder.ray.resources.GPU", "built-in Ray resource"),
        ("{resources: {CPU: 1}}", "processes.vocoder.ray.resources.CPU", "num_cpus"),
        ("{resources: {node_b: 0}}", "processes.vocoder.ray.resources.node_b", "greater than 0"),
        ("{resources: {node_b: 1.5}}", "processes.vocoder.ray.resources.node_b", "whole numbers"),
        ("{num_cpus: -1}", "processes.vocoder.ray.num_cpus", "greater than or equal to 0"),
        ("{label_selector: {'bad key!': x}}", "processes.vocoder.ray.label_selector.bad key!", "label key"),
        ("{placement_group: x}", "processes.vocoder.ray.placement_group", "unknown"),
    ],
)
def test_invalid_ray_placement_names_the_path_and_rule(model_dir, write, yaml_ray, path, rule):
    deploy = write("deploy.yaml", f"extends: models/higgs_tts.yaml\nprocesses:\n  vocoder:\n    ray: {yaml_ray}\n")
    error = raises_config_error(load_config, deploy)
    found = issues_by_path(error)
    assert path in found, error.render()
    assert rule in found[path][0].rule + found[path][0].fix, error.render()


def test_unknown_ray_field_suggests_from_process_fields(model_dir):
    error = raises_config_error(load_config, model_dir / "higgs_tts.yaml", ["--processes.vocoder.ray.num_cpu", "1"])
    (issue,) = error.issues
    assert issue.path == "processes.vocoder.ray.num_cpu"
    assert "ray.num_cpus" in issue.fix


def test_every_ray_mistake_is_reported_at_once(model_dir, write):
    deploy = write("deploy.yaml", """\
        extends: models/higgs_tts.yaml
        processes:
          vocoder: {ray: {resources: {GPU: 1}, num_cpus: -2}}
          tts_frontend: {ray: {resources: {node_a: 2.5}}}
        """)
    found = issues_by_path(raises_config_error(load_config, deploy))
    assert {"processes.vocoder.ray.resources.GPU", "processes.vocoder.ray.num_cpus", "processes.tts_frontend.ray.resources.node_a"} <= set(found)
