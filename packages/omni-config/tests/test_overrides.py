"""Dotted CLI overrides exactly as docs/concepts.md describes them."""

from __future__ import annotations

import pytest
from config_helpers import issues_by_path, raises_config_error, single_issue

from omni_config import raw_config, split_overrides


def test_equals_and_space_forms_are_equivalent(higgs):
    spaced = raw_config(higgs, ["--stages.vocoder.process", "pipeline", "--stages.vocoder.gpu", "1"])
    equals = raw_config(higgs, ["--stages.vocoder.process=pipeline", "--stages.vocoder.gpu=1"])
    assert spaced == equals
    assert spaced.stage("vocoder").process == "pipeline" and spaced.stage("vocoder").gpu == 1


def test_value_containing_equals_sign(higgs):
    config = raw_config(higgs, ["--stages.tts_engine.factory_args.dtype=a=b"])
    assert config.stage("tts_engine").factory_args["dtype"] == "a=b"


@pytest.mark.parametrize("text", ["0,1", "[0,1]", "[0, 1]", " 0 , 1 "])
def test_gpu_list_forms(higgs, text):
    config = raw_config(higgs, ["--stages.tts_engine.gpu", text, "--stages.tts_engine.tp_size", "2"])
    assert config.stage("tts_engine").gpu == [0, 1]
    assert config.stage("tts_engine").tp_size == 2


def test_single_gpu_stays_an_int(higgs):
    assert raw_config(higgs, ["--stages.vocoder.gpu", "3"]).stage("vocoder").gpu == 3


@pytest.mark.parametrize("text,expected", [("1,2", [1, 2]), ("[1,2]", [1, 2]), ("1", [1]), ("[3]", [3])])
def test_replica_devices_forms_and_entry_creation(higgs, text, expected):
    assert "processes" not in higgs
    config = raw_config(higgs, ["--processes.vocoder.num_replicas", "2", "--processes.vocoder.replica_devices", text])
    assert config.processes["vocoder"].num_replicas == 2
    assert config.processes["vocoder"].replica_devices == expected


def test_processes_override_creates_the_entry_for_any_field(higgs):
    config = raw_config(higgs, ["--processes.vocoder.replica_devices=2"])
    assert set(config.processes) == {"vocoder"}
    assert config.processes["vocoder"].num_replicas == 1
    assert config.processes["vocoder"].replica_devices == [2]


def test_processes_override_merges_into_an_existing_entry(higgs):
    higgs["processes"] = {"vocoder": {"num_replicas": 2, "replica_devices": [1, 2]}}
    config = raw_config(higgs, ["--processes.vocoder.num_replicas", "3"])
    assert config.processes["vocoder"].num_replicas == 3
    assert config.processes["vocoder"].replica_devices == [1, 2]


def test_memory_fraction_and_placement_overrides(higgs):
    config = raw_config(higgs, [
        "--stages.vocoder.runtime.resources.total_gpu_memory_fraction", "0.05",
        "--placement.max_total_gpu_memory_fraction_per_gpu", "0.9",
        "--placement.require_memory_fraction_for_colocation", "false",
        "--placement.num_gpus", "8",
    ])
    assert config.stage("vocoder").memory_fraction == 0.05
    assert config.placement.max_total_gpu_memory_fraction_per_gpu == 0.9
    assert config.placement.require_memory_fraction_for_colocation is False
    assert config.placement.num_gpus == 8


def test_fraction_override_on_stage_without_runtime_block(higgs):
    assert "runtime" not in higgs["stages"][0]
    config = raw_config(higgs, ["--stages.preprocessing.runtime.resources.total_gpu_memory_fraction=0.01"])
    assert config.stage("preprocessing").memory_fraction == 0.01


@pytest.mark.parametrize("text", ["123", "007", "1e3", "0.10", "true", "null", "2024-01-01", "0x1F"])
def test_process_names_that_look_like_numbers_stay_strings(higgs, text):
    config = raw_config(higgs, ["--stages.vocoder.process", text])
    assert config.stage("vocoder").process == text
    config = raw_config(higgs, [f"--stages.vocoder.process={text}", f"--processes.{text}.num_replicas", "2", f"--processes.{text}.replica_devices", "1,2"])
    assert list(config.processes) == [text]
    assert config.processes[text].num_replicas == 2


@pytest.mark.parametrize("text,expected", [
    ("16", 16), ("0.5", 0.5), ("true", True), ("[1, 2]", [1, 2]), ("{a: 1}", {"a": 1}), ("bfloat16", "bfloat16"), ("'16'", "16"),
])
def test_factory_args_values_are_yaml_typed(higgs, text, expected):
    config = raw_config(higgs, ["--stages.tts_engine.factory_args.max_batch_size", text])
    assert config.stage("tts_engine").factory_args["max_batch_size"] == expected


def test_factory_args_override_of_undeclared_argument(higgs):
    issue = single_issue(raises_config_error(raw_config, higgs, ["--stages.tts_engine.factory_args.max_batch", "2"]), "stages.tts_engine.factory_args.max_batch")
    assert "declares no factory argument 'max_batch'" in issue.rule
    assert "did you mean 'max_batch_size'?" in issue.fix
    assert issue.source == "command line"


def test_factory_args_needs_one_argument_name(higgs):
    error = raises_config_error(raw_config, higgs, ["--stages.tts_engine.factory_args", "{max_batch_size: 2}"])
    assert "stages.tts_engine.factory_args" in issues_by_path(error)


# --- did-you-mean ------------------------------------------------------------------------------

@pytest.mark.parametrize("tokens,path,suggestion", [
    (["--stages.vocodr.process", "x"], "stages.vocodr", "vocoder"),
    (["--stages.tts_engin.gpu", "0"], "stages.tts_engin", "tts_engine"),
    (["--stages.vocoder.procss", "x"], "stages.vocoder.procss", "process"),
    (["--stages.vocoder.tp_sise", "2"], "stages.vocoder.tp_sise", "tp_size"),
    (["--stages.vocoder.runtime.resources.total_gpu_memory_fractio", "0.1"], "stages.vocoder.runtime.resources.total_gpu_memory_fractio", "runtime.resources.total_gpu_memory_fraction"),
    (["--processes.vocoder.num_replica", "2"], "processes.vocoder.num_replica", "num_replicas"),
    (["--processes.vocoder.replica_device", "1"], "processes.vocoder.replica_device", "replica_devices"),
    (["--placement.num_gpu", "2"], "placement.num_gpu", "num_gpus"),
    (["--placment.num_gpus", "2"], "placment.num_gpus", "placement"),
    (["--stage.vocoder.process", "x"], "stage.vocoder.process", "stages"),
])
def test_unknown_names_get_a_did_you_mean(higgs, tokens, path, suggestion):
    error = raises_config_error(raw_config, higgs, tokens)
    issue = single_issue(error, path)
    assert f"did you mean {suggestion!r}?" in issue.fix
    assert issue.source == "command line"
    assert len(error.issues) == 1


def test_unknown_stage_without_close_match_lists_all_stages(higgs):
    issue = single_issue(raises_config_error(raw_config, higgs, ["--stages.zzz.process", "x"]), "stages.zzz")
    assert issue.fix == "use one of the valid stage names: audio_encoder, preprocessing, tts_engine, vocoder"


# --- model tier via the CLI ---------------------------------------------------------------------

@pytest.mark.parametrize("field", ["next", "stream_to", "wait_for", "merge_fn", "route_fn", "terminal", "factory", "env.A", "name"])
def test_cli_model_tier_stage_fields_are_refused(higgs, field):
    root = field.split(".")[0]
    issue = single_issue(raises_config_error(raw_config, higgs, [f"--stages.vocoder.{field}", "m.x:y"]), f"stages.vocoder.{field}")
    assert f"'{root}'" in issue.rule and "belongs to the model tier" in issue.rule


@pytest.mark.parametrize("path", ["process_local_edges.src", "entry_stage.x", "name.x"])
def test_cli_model_tier_pipeline_fields_are_refused(higgs, path):
    issue = single_issue(raises_config_error(raw_config, higgs, [f"--{path}", "v"]), path)
    assert "belongs to the model tier" in issue.rule


def test_cli_extends_is_not_a_setting(higgs):
    issue = single_issue(raises_config_error(raw_config, higgs, ["--extends.x", "v"]), "extends.x")
    assert "is not a setting" in issue.rule
    assert "deployment file" in issue.fix


def test_cli_stage_name_is_called_the_stages_name(higgs):
    issue = single_issue(raises_config_error(raw_config, higgs, ["--stages.vocoder.name", "v"]), "stages.vocoder.name")
    assert "'name' is the stage's name" in issue.rule


# --- the same path twice -----------------------------------------------------------------------

def test_same_path_twice_with_different_values_is_refused(higgs):
    error = raises_config_error(raw_config, higgs, ["--stages.vocoder.process", "a", "--stages.vocoder.process=b"])
    issue = single_issue(error, "stages.vocoder.process")
    assert "given twice" in issue.rule and "'a'" in issue.rule and "'b'" in issue.rule
    assert issue.fix == "pass each override once"


def test_same_path_twice_with_same_value_is_accepted(higgs):
    config = raw_config(higgs, ["--stages.vocoder.process", "a", "--stages.vocoder.process=a"])
    assert config.stage("vocoder").process == "a"


def test_same_typed_value_in_two_spellings_is_accepted(higgs):
    config = raw_config(higgs, ["--processes.vocoder.replica_devices", "1,2", "--processes.vocoder.replica_devices", "[1, 2]", "--processes.vocoder.num_replicas", "2"])
    assert config.processes["vocoder"].replica_devices == [1, 2]


def test_twice_with_different_values_on_different_paths_is_fine(higgs):
    config = raw_config(higgs, ["--stages.vocoder.process", "a", "--stages.tts_engine.process", "b"])
    assert (config.stage("vocoder").process, config.stage("tts_engine").process) == ("a", "b")


# --- malformed tokens and badly typed values ----------------------------------------------------

def test_badly_typed_values_name_the_path(higgs):
    error = raises_config_error(raw_config, higgs, [
        "--stages.vocoder.tp_size", "two",
        "--processes.vocoder.num_replicas", "[1",
        "--stages.vocoder.gpu", "-1",
        "--placement.max_total_gpu_memory_fraction_per_gpu", "lots",
    ])
    paths = issues_by_path(error)
    assert set(paths) == {"stages.vocoder.tp_size", "processes.vocoder.num_replicas", "stages.vocoder.gpu", "placement.max_total_gpu_memory_fraction_per_gpu"}
    assert paths["processes.vocoder.num_replicas"][0].rule.startswith("not a valid value")
    assert paths["stages.vocoder.gpu"][0].value == -1


def test_override_without_value(higgs):
    issue = single_issue(raises_config_error(raw_config, higgs, ["--stages.vocoder.process"]), "stages.vocoder.process")
    assert issue.rule == "an override needs a value"
    assert issue.fix == "write --stages.vocoder.process VALUE or --stages.vocoder.process=VALUE"


def test_flag_followed_by_flag_needs_a_value(higgs):
    error = raises_config_error(raw_config, higgs, ["--stages.vocoder.process", "--stages.vocoder.gpu", "1"])
    assert single_issue(error, "stages.vocoder.process").rule == "an override needs a value"


def test_negative_number_is_a_value_not_a_flag(higgs):
    issue = single_issue(raises_config_error(raw_config, higgs, ["--stages.vocoder.gpu", "-1"]), "stages.vocoder.gpu")
    assert issue.value == -1


@pytest.mark.parametrize("token,path", [("--stages..process=x", "stages..process"), ("--vocoder=x", "vocoder"), ("--.a=1", ".a")])
def test_malformed_paths(higgs, token, path):
    issue = single_issue(raises_config_error(raw_config, higgs, [token]), path)
    assert "a.b[.c...]" in issue.rule


def test_stray_argument(higgs):
    issue = single_issue(raises_config_error(raw_config, higgs, ["stray"]), "command line")
    assert "unexpected argument 'stray'" in issue.rule


def test_overlong_value(higgs):
    issue = single_issue(raises_config_error(raw_config, higgs, ["--stages.vocoder.process", "x" * 5000]), "stages.vocoder.process")
    assert "limited to 4096 characters" in issue.rule


@pytest.mark.parametrize("tokens,path", [
    (["--stages.vocoder", "x"], "stages.vocoder"),
    (["--processes.vocoder", "2"], "processes.vocoder"),
    (["--processes.vocoder.num_replicas.x", "2"], "processes.vocoder.num_replicas.x"),
    (["--placement.num_gpus.x", "2"], "placement.num_gpus.x"),
    (["--stages.vocoder.runtime", "0.1"], "stages.vocoder.runtime"),
])
def test_incomplete_or_too_deep_paths(higgs, tokens, path):
    single_issue(raises_config_error(raw_config, higgs, tokens), path)


def test_every_override_error_at_once(higgs):
    error = raises_config_error(raw_config, higgs, [
        "--stages.vocodr.process", "x",
        "--stages.vocoder.next", "y",
        "--processes.vocoder.num_replica", "2",
        "--stages.tts_engine.tp_size", "0",
        "stray",
    ])
    assert {i.path for i in error.issues} == {"stages.vocodr", "stages.vocoder.next", "processes.vocoder.num_replica", "stages.tts_engine.tp_size", "command line"}


# --- split_overrides ------------------------------------------------------------------------------

def test_split_overrides_keeps_ordinary_options():
    positional, overrides = split_overrides(["validate", "f.yaml", "--format", "json", "--stages.v.process", "p", "--gpus=2", "--a.b=c"])
    assert positional == ["validate", "f.yaml", "--format", "json", "--gpus=2"]
    assert overrides == ["--stages.v.process", "p", "--a.b=c"]


def test_split_overrides_trailing_flag_without_value():
    assert split_overrides(["show", "--stages.v.process"]) == (["show"], ["--stages.v.process"])


def test_split_overrides_does_not_swallow_the_next_flag():
    """A forgotten value must not eat `--format`: the override then reports it needs a value."""
    assert split_overrides(["show", "f", "--stages.v.process", "--format", "json"]) == (["show", "f", "--format", "json"], ["--stages.v.process"])
    assert split_overrides(["show", "--stages.v.gpu", "-1"]) == (["show"], ["--stages.v.gpu", "-1"])


def test_split_then_parse_round_trip(higgs):
    _, overrides = split_overrides(["show", "x.yaml", "--stages.vocoder.process", "solo", "--format", "text"])
    assert raw_config(higgs, overrides).stage("vocoder").process == "solo"


def test_dotted_stage_and_process_names_are_addressable(higgs):
    """Names may contain '.', so the override path re-joins them instead of splitting blindly."""
    higgs["stages"][3]["name"] = "vocoder.v2"
    higgs["stages"][2]["next"] = higgs["stages"][2]["stream_to"] = "vocoder.v2"
    config = raw_config(higgs, [
        "--stages.vocoder.v2.process", "voc.a",
        "--stages.vocoder.v2.runtime.resources.total_gpu_memory_fraction", "0.2",
        "--processes.voc.a.num_replicas", "2",
    ])
    assert config.stage("vocoder.v2").process == "voc.a"
    assert config.stage("vocoder.v2").memory_fraction == 0.2
    assert config.processes["voc.a"].num_replicas == 2
