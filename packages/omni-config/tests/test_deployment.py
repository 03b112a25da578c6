"""Deployment files (`extends:`), the model/deployment tier split, and file errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_helpers import fixture_dict, issues_by_path, raises_config_error, single_issue

from omni_config import ConfigError, ConfigFileError, load_config, load_model, raw_config, resolve_model_source


def _topology(config) -> list[tuple[str, str | None]]:
    return [(s.name, s.process) for s in config.stages]


# --- extends: relative paths, directories, registered names ----------------------------------

def test_extends_relative_path_noop_deployment_equals_model(model_dir, write):
    """The spec's no-op: redeclaring Higgs' tts_frontend placement changes nothing."""
    deploy = write("deploy/higgs_frontend.yaml", """\
        extends: ../models/higgs_tts.yaml
        stages:
          - name: preprocessing
            process: tts_frontend
          - name: audio_encoder
            process: tts_frontend
        """)
    assert load_config(deploy) == load_config(model_dir / "higgs_tts.yaml")


def test_extends_is_relative_to_the_deployment_file_not_the_cwd(model_dir, write, monkeypatch, tmp_path):
    deploy = write("a/b/deploy.yaml", "extends: ../../models/higgs_tts.yaml\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_config(deploy).name == "bosonai/higgs-tts-3-4b"


def test_extends_a_directory_reads_its_pipeline_yaml(model_dir, write):
    (model_dir / "qwen").mkdir()
    (model_dir / "qwen" / "pipeline.yaml").write_text((model_dir / "qwen3_tts.yaml").read_text())
    deploy = write("deploy.yaml", "extends: models/qwen\n")
    assert load_config(deploy).name == "qwen/qwen3-tts"


def test_extends_registered_model_name(model_dir, write, clean_registry):
    clean_registry("test/higgs", model_dir / "higgs_tts.yaml")
    deploy = write("deploy.yaml", """\
        extends: test/higgs
        stages:
          - name: vocoder
            process: pipeline
        """)
    config = load_config(deploy)
    assert _topology(config) == [("preprocessing", "tts_frontend"), ("audio_encoder", "tts_frontend"), ("tts_engine", "pipeline"), ("vocoder", "pipeline")]


def test_unknown_model_name_in_extends_suggests_and_says_pass_a_path(model_dir, write, clean_registry):
    clean_registry("test/higgs-tts", model_dir / "higgs_tts.yaml")
    deploy = write("deploy.yaml", "extends: test/higgs-tt\n")
    error = raises_config_error(load_config, deploy)
    issue = single_issue(error, "extends")
    assert issue.value == "test/higgs-tt"
    assert "not a pipeline file" in issue.rule and "test/higgs-tts" in issue.rule
    assert "did you mean 'test/higgs-tts'?" in issue.fix
    assert "pass the model's pipeline file path instead" in issue.fix
    assert error.exit_code == 1


def test_unknown_model_name_without_any_registry(write, clean_registry, monkeypatch):
    from omni_config import registry

    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    registry._registered.clear()
    issue = single_issue(raises_config_error(load_config, write("d.yaml", "extends: nobody/nothing\n")), "extends")
    assert "none installed" in issue.rule
    assert "pass the model's pipeline file path instead" in issue.fix


@pytest.mark.parametrize("value", ["", "[]", "3", "{a: 1}", "null"])
def test_extends_must_be_a_non_empty_string(write, value):
    issue = single_issue(raises_config_error(load_config, write("d.yaml", f"extends: {value}\n")), "extends")
    assert "model name or a path" in issue.rule


def test_extends_chain_deployment_of_deployment(model_dir, write):
    write("base_deploy.yaml", """\
        extends: models/higgs_tts.yaml
        stages:
          - name: vocoder
            process: voc_base
            runtime: {resources: {total_gpu_memory_fraction: 0.05}}
        """)
    top = write("top_deploy.yaml", """\
        extends: base_deploy.yaml
        stages:
          - name: vocoder
            process: voc_top
        """)
    config = load_config(top)
    assert config.stage("vocoder").process == "voc_top"
    assert config.stage("vocoder").memory_fraction == 0.05


def test_extends_self_cycle(write):
    path = write("loop.yaml", "extends: loop.yaml\n")
    issue = single_issue(raises_config_error(load_config, path), "extends")
    assert "cycle" in issue.rule
    assert "full model pipeline file" in issue.fix


def test_extends_two_file_cycle(write):
    write("a.yaml", "extends: b.yaml\n")
    write("b.yaml", "extends: a.yaml\n")
    for name in ("a.yaml", "b.yaml"):
        issue = single_issue(raises_config_error(load_config, Path(write("c.yaml", f"extends: {name}\n"))), "extends")
        assert "cycle" in issue.rule and "a.yaml" in issue.rule and "b.yaml" in issue.rule


def test_extends_chain_too_deep(model_dir, write):
    write("d0.yaml", "extends: models/higgs_tts.yaml\n")
    for i in range(1, 20):
        write(f"d{i}.yaml", f"extends: d{i - 1}.yaml\n")
    issue = single_issue(raises_config_error(load_config, write("top.yaml", "extends: d19.yaml\n")), "extends")
    assert "levels of extends" in issue.rule


# --- merging by name, precedence ------------------------------------------------------------

def test_stages_merge_by_name_and_keep_model_order(model_dir, write):
    deploy = write("d.yaml", """\
        extends: models/higgs_tts.yaml
        stages:
          - name: vocoder
            gpu: 1
          - name: preprocessing
            process: alone
        """)
    config = load_config(deploy)
    model = load_config(model_dir / "higgs_tts.yaml")
    assert config.stage_names == model.stage_names
    assert config.stage("vocoder").gpu == 1
    assert config.stage("vocoder").process == "vocoder"  # untouched fields keep the model's values
    assert config.stage("vocoder").factory == model.stage("vocoder").factory
    assert config.stage("preprocessing").process == "alone"
    assert config.stage("tts_engine") == model.stage("tts_engine")
    assert config.stage("audio_encoder") == model.stage("audio_encoder")


def test_deployment_sets_every_deployment_field(model_dir, write):
    deploy = write("d.yaml", """\
        extends: models/higgs_tts.yaml
        stages:
          - name: tts_engine
            gpu: [0, 1]
            tp_size: 2
            factory_args: {max_batch_size: 32}
            runtime: {resources: {total_gpu_memory_fraction: 0.5}}
        processes:
          vocoder: {num_replicas: 2, replica_devices: [1, 2]}
        placement:
          max_total_gpu_memory_fraction_per_gpu: 0.9
          require_memory_fraction_for_colocation: false
          num_gpus: 4
        """)
    config = load_config(deploy)
    engine = config.stage("tts_engine")
    assert (engine.gpu, engine.tp_size, engine.memory_fraction) == ([0, 1], 2, 0.5)
    assert engine.factory_args == {"max_batch_size": 32, "dtype": "bfloat16"}  # only the named arg changes
    assert config.processes["vocoder"].num_replicas == 2
    assert config.processes["vocoder"].replica_devices == [1, 2]
    assert config.placement.max_total_gpu_memory_fraction_per_gpu == 0.9
    assert config.placement.require_memory_fraction_for_colocation is False
    assert config.placement.num_gpus == 4


def test_precedence_model_then_deployment_then_cli(model_dir, write):
    deploy = write("d.yaml", """\
        extends: models/higgs_tts.yaml
        stages:
          - name: vocoder
            process: from_deployment
            runtime: {resources: {total_gpu_memory_fraction: 0.2}}
        placement: {max_total_gpu_memory_fraction_per_gpu: 0.99}
        """)
    assert load_config(model_dir / "higgs_tts.yaml").stage("vocoder").process == "vocoder"
    assert load_config(deploy).stage("vocoder").process == "from_deployment"
    config = load_config(deploy, ["--stages.vocoder.process", "from_cli", "--placement.max_total_gpu_memory_fraction_per_gpu=0.98"])
    assert config.stage("vocoder").process == "from_cli"  # a CLI value over a deployment value is not a conflict
    assert config.stage("vocoder").memory_fraction == 0.2
    assert config.placement.max_total_gpu_memory_fraction_per_gpu == 0.98


# --- the model tier is refused, naming the field -----------------------------------------------

@pytest.mark.parametrize("field,yaml_value", [
    ("next", "[tts_engine]"),
    ("stream_to", "audio_encoder"),
    ("wait_for", "[tts_engine]"),
    ("merge_fn", "m.x:merge"),
    ("route_fn", "m.x:route"),
    ("terminal", "false"),
    ("factory", "other.mod:build"),
    ("env", "{A: '1'}"),
])
def test_deployment_touching_model_tier_stage_field_is_refused(model_dir, write, field, yaml_value):
    deploy = write("d.yaml", f"""\
        extends: models/higgs_tts.yaml
        stages:
          - name: vocoder
            {field}: {yaml_value}
        """)
    error = raises_config_error(load_config, deploy)
    issue = single_issue(error, f"stages.vocoder.{field}")
    assert f"'{field}'" in issue.rule and "belongs to the model tier" in issue.rule
    assert "edit the model's pipeline file" in issue.fix
    assert issue.source == str(deploy)
    assert len(error.issues) == 1


@pytest.mark.parametrize("field,yaml_value", [
    ("process_local_edges", "[]"),
    ("entry_stage", "vocoder"),
    ("name", "other/model"),
])
def test_deployment_touching_model_tier_pipeline_field_is_refused(model_dir, write, field, yaml_value):
    deploy = write("d.yaml", f"extends: models/higgs_tts.yaml\n{field}: {yaml_value}\n")
    issue = single_issue(raises_config_error(load_config, deploy), field)
    assert "belongs to the model tier" in issue.rule


def test_contract_removal_from_deployment_is_refused(model_dir, write):
    """Emptying the contract would silently allow the forbidden split: it names the field."""
    deploy = write("d.yaml", """\
        extends: models/qwen3_tts.yaml
        process_local_edges: []
        stages:
          - name: preprocessing
            process: frontend
        """)
    issue = single_issue(raises_config_error(load_config, deploy), "process_local_edges")
    assert "process-local contract" in issue.rule


def test_adding_a_stage_is_refused_with_did_you_mean(model_dir, write):
    deploy = write("d.yaml", """\
        extends: models/higgs_tts.yaml
        stages:
          - name: vocodr
            process: x
          - name: brand_new
            factory: pkg.mod:build
            terminal: true
        """)
    error = raises_config_error(load_config, deploy)
    typo = single_issue(error, "stages.vocodr")
    assert "adding a stage belongs to the model tier" in typo.rule
    assert "did you mean 'vocoder'?" in typo.fix
    new = issues_by_path(error)["stages.brand_new"]
    assert all("adding a stage belongs to the model tier" in i.rule for i in new)


def test_factory_args_values_only_for_declared_args(model_dir, write):
    ok = write("ok.yaml", """\
        extends: models/higgs_tts.yaml
        stages:
          - name: tts_engine
            factory_args: {max_batch_size: 2, dtype: float16}
        """)
    assert load_config(ok).stage("tts_engine").factory_args == {"max_batch_size": 2, "dtype": "float16"}
    bad = write("bad.yaml", """\
        extends: models/higgs_tts.yaml
        stages:
          - name: tts_engine
            factory_args: {max_batch: 2}
          - name: vocoder
            factory_args: {chunk: 1}
        """)
    error = raises_config_error(load_config, bad)
    typo = single_issue(error, "stages.tts_engine.factory_args.max_batch")
    assert "declares no factory argument 'max_batch'" in typo.rule
    assert "did you mean 'max_batch_size'?" in typo.fix
    none = single_issue(error, "stages.vocoder.factory_args.chunk")
    assert "declares no factory argument 'chunk'" in none.rule


def test_factory_args_value_may_be_any_yaml_value(model_dir, write):
    deploy = write("d.yaml", """\
        extends: models/higgs_tts.yaml
        stages:
          - name: tts_engine
            factory_args: {max_batch_size: {nested: [1, 2]}}
        """)
    assert load_config(deploy).stage("tts_engine").factory_args["max_batch_size"] == {"nested": [1, 2]}


def test_deployment_unknown_fields_suggest(model_dir, write):
    deploy = write("d.yaml", """\
        extends: models/higgs_tts.yaml
        stages:
          - name: vocoder
            procss: x
            runtime: {resources: {total_gpu_memory_fractio: 0.1}}
        processes:
          vocoder: {num_replica: 2}
        placement:
          num_gpu: 2
        stagess: []
        """)
    error = raises_config_error(load_config, deploy)
    assert "did you mean 'process'?" in single_issue(error, "stages.vocoder.procss").fix
    assert "did you mean 'runtime.resources.total_gpu_memory_fraction'?" in single_issue(error, "stages.vocoder.runtime.resources.total_gpu_memory_fractio").fix
    assert "did you mean 'num_replicas'?" in single_issue(error, "processes.vocoder.num_replica").fix
    assert "did you mean 'num_gpus'?" in single_issue(error, "placement.num_gpu").fix
    assert "did you mean 'stages'?" in single_issue(error, "stagess").fix
    assert len(error.issues) == 5


def test_every_deployment_error_is_reported_at_once(model_dir, write):
    deploy = write("d.yaml", """\
        extends: models/higgs_tts.yaml
        entry_stage: vocoder
        stages:
          - name: vocoder
            next: tts_engine
            gpu: -1
          - name: nope
            process: x
          - process: nameless
        processes:
          vocoder: {num_replicas: 0}
        """)
    error = raises_config_error(load_config, deploy)
    assert {i.path for i in error.issues} == {
        "entry_stage", "stages.vocoder.next", "stages.nope", "stages[2]", "stages.vocoder.gpu", "processes.vocoder.num_replicas",
    }


def test_deployment_stages_must_be_a_list(model_dir, write):
    deploy = write("d.yaml", "extends: models/higgs_tts.yaml\nstages: {vocoder: {process: x}}\n")
    issue = single_issue(raises_config_error(load_config, deploy), "stages")
    assert "list" in issue.rule


def test_deployment_values_are_typed_by_the_schema(model_dir, write):
    deploy = write("d.yaml", """\
        extends: models/higgs_tts.yaml
        stages:
          - name: vocoder
            tp_size: many
            process: 5
        """)
    error = raises_config_error(load_config, deploy)
    assert set(issues_by_path(error)) == {"stages.vocoder.tp_size", "stages.vocoder.process"}


def test_deployment_errors_and_model_errors_are_reported_together(write):
    base = fixture_dict("higgs_tts")
    base["stages"][0]["procss"] = "typo_in_model"
    import yaml

    write("model.yaml", yaml.safe_dump(base))
    deploy = write("d.yaml", "extends: model.yaml\nstages: [{name: vocoder, next: x}]\n")
    assert set(issues_by_path(raises_config_error(load_config, deploy))) == {"stages.preprocessing.procss", "stages.vocoder.next"}


# --- load_model / resolve_model_source ------------------------------------------------------

def test_load_model_by_registered_name_path_and_directory(model_dir, clean_registry):
    clean_registry("test/qwen3", model_dir / "qwen3_tts.yaml")
    by_name = load_model("test/qwen3")
    by_path = load_model(model_dir / "qwen3_tts.yaml")
    (model_dir / "q").mkdir()
    (model_dir / "q" / "pipeline.yaml").write_text((model_dir / "qwen3_tts.yaml").read_text())
    by_dir = load_model(model_dir / "q")
    assert by_name == by_path == by_dir
    overridden = load_model("test/qwen3", ["--stages.vocoder.gpu", "1"])
    assert overridden.stage("vocoder").gpu == 1


def test_unknown_model_source_is_a_file_error(clean_registry, model_dir):
    clean_registry("test/qwen3", model_dir / "qwen3_tts.yaml")
    with pytest.raises(ConfigFileError) as info:
        resolve_model_source("test/qwen")
    assert info.value.exit_code == 2
    assert "did you mean 'test/qwen3'?" in info.value.fix
    assert "pass the model's pipeline file path instead" in info.value.fix


def test_registered_models_lists_registrations(clean_registry, model_dir):
    from omni_config import registered_models

    clean_registry("test/ming", model_dir / "ming_omni_tts.yaml")
    assert registered_models()["test/ming"] == str(model_dir / "ming_omni_tts.yaml")


# --- unreadable files and YAML syntax: ConfigFileError, exit code 2 ------------------------------

def _file_error(path) -> ConfigFileError:
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    assert info.value.exit_code == 2
    assert not isinstance(info.value, ConfigError)
    return info.value


def test_missing_file(tmp_path):
    error = _file_error(tmp_path / "nope.yaml")
    assert error.reason == "no such file" and error.path == str(tmp_path / "nope.yaml")


def test_directory_instead_of_file(tmp_path):
    assert _file_error(tmp_path).reason == "is a directory"


def test_yaml_syntax_error_names_line_and_column(write):
    error = _file_error(write("bad.yaml", "stages:\n  - name: a\n    next: [b\n"))
    assert error.reason.startswith("YAML syntax error at line ")
    assert "column" in error.reason
    assert error.fix == "fix the YAML syntax"


@pytest.mark.parametrize("text,reason", [
    ("", "the file is empty"),
    ("# only a comment\n", "the file is empty"),
    ("- a\n- b\n", "the top level is a list, not a mapping"),
    ("just a string\n", "the top level is a str, not a mapping"),
])
def test_file_that_is_not_a_mapping(write, text, reason):
    assert _file_error(write("f.yaml", text)).reason == reason


def test_non_utf8_file(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: caf\xe9\xff\xfe\n")
    assert _file_error(path).reason.startswith("cannot read")


def test_oversized_file(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_bytes(b"#" * (4 * 1024 * 1024 + 1))
    assert "limited to" in _file_error(path).reason


def test_yaml_python_tags_are_not_executed(write):
    """safe loading: a python/object tag is a syntax-level refusal, never code execution."""
    _file_error(write("evil.yaml", "name: !!python/object/apply:os.system ['true']\nstages: []\n"))


def test_file_error_to_dict(tmp_path):
    error = _file_error(tmp_path / "gone.yaml")
    assert error.to_dict() == {"valid": False, "errors": [{"path": str(tmp_path / "gone.yaml"), "rule": "no such file", "fix": "check the path"}]}


def test_deployment_extending_a_broken_file_is_a_file_error(write):
    write("broken.yaml", "stages: [\n")
    _file_error(write("d.yaml", "extends: broken.yaml\n"))


def test_full_file_with_overrides_equals_raw_config(model_dir):
    overrides = ["--stages.vocoder.process", "pipeline"]
    assert load_config(model_dir / "higgs_tts.yaml", overrides) == raw_config(fixture_dict("higgs_tts"), overrides)


def test_a_published_mixed_case_id_finds_its_lower_case_entry_point(monkeypatch, model_dir):
    """Hub ids are mixed case (Qwen/Qwen3-TTS-12Hz-1.7B-Base); entry point names are lower case."""
    from types import SimpleNamespace

    from omni_config import registry, resolve_model

    (model_dir / "pkg").mkdir()
    (model_dir / "pkg" / "pipeline.yaml").write_text((model_dir / "qwen3_tts.yaml").read_text())
    monkeypatch.setattr(registry, "entry_points", lambda group: [SimpleNamespace(name="org/some-model-1.7b", value="pkgmod:pipeline")])
    monkeypatch.setattr(registry, "_entry_point_file", lambda value: model_dir / "pkg" / "pipeline.yaml")
    assert resolve_model("Org/Some-Model-1.7B") == model_dir / "pkg" / "pipeline.yaml"
    assert resolve_model("org/other") is None
