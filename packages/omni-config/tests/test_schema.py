"""The schema of both config tiers (docs/concepts.md): fields, shorthand, types, ranges, names, unknown keys."""

from __future__ import annotations

from typing import Any

import pytest
from config_helpers import fixture_dict, issues_by_path, raises_config_error, single_issue
from pydantic import ValidationError

from omni_config import ConfigError, PipelineConfig, raw_config


def test_higgs_fixture_loads_with_every_field(higgs):
    config = raw_config(higgs)
    assert isinstance(config, PipelineConfig)
    assert config.name == "bosonai/higgs-tts-3-4b"
    assert config.entry == "preprocessing"
    assert config.stage_names == ("preprocessing", "audio_encoder", "tts_engine", "vocoder")
    engine = config.stage("tts_engine")
    assert engine.process == "pipeline"
    assert engine.gpu == 0 and engine.gpu_ids == (0,)
    assert engine.memory_fraction == 0.85
    assert engine.factory_args == {"max_batch_size": 8, "dtype": "bfloat16"}
    assert config.stage("vocoder").env == {"OMNI_VOCODER_CHUNK": "2048"}
    assert config.stage("vocoder").terminal is True
    assert config.stage("preprocessing").gpu_ids == ()
    assert config.stage("preprocessing").memory_fraction is None
    assert config.processes == {}
    assert config.placement.max_total_gpu_memory_fraction_per_gpu == 1.0
    assert config.placement.require_memory_fraction_for_colocation is True
    assert config.placement.num_gpus is None
    assert config.process_local_edges == []


def test_entry_stage_defaults_to_first_stage_and_can_be_declared(higgs):
    assert raw_config(higgs).entry == "preprocessing"
    higgs["entry_stage"] = "audio_encoder"
    assert raw_config(higgs).entry == "audio_encoder"


def test_stage_lookup_of_unknown_name_is_a_key_error(higgs):
    with pytest.raises(KeyError):
        raw_config(higgs).stage("nope")


@pytest.mark.parametrize("field", ["next", "stream_to", "wait_for"])
def test_name_list_shorthand(higgs, field):
    """`next: vocoder` is shorthand for `next: [vocoder]`; a list stays a list; null is empty."""
    stage = higgs["stages"][2]
    stage[field] = "vocoder"
    assert getattr(raw_config(higgs).stage("tts_engine"), field) == ["vocoder"]
    stage[field] = ["vocoder", "audio_encoder"]
    assert getattr(raw_config(higgs).stage("tts_engine"), field) == ["vocoder", "audio_encoder"]
    stage[field] = None
    assert getattr(raw_config(higgs).stage("tts_engine"), field) == []


def test_process_local_edges_are_parsed(qwen3):
    config = raw_config(qwen3)
    (edge,) = config.process_local_edges
    assert (edge.src, edge.dst) == ("preprocessing", "tts_engine")
    assert "_PREPARED_REQUESTS" in edge.reason


def test_config_values_are_frozen(higgs):
    config = raw_config(higgs)
    with pytest.raises(ValidationError, match="frozen"):
        config.stages[0].process = "other"  # type: ignore[misc]


# --- unknown keys, at every level, with a did-you-mean -----------------------------------

def _set(data: dict[str, Any], where: str, key: str, value: Any) -> None:
    if where == "top":
        data[key] = value
    elif where == "stage":
        data["stages"][3][key] = value
    elif where == "runtime":
        data["stages"][3]["runtime"][key] = value
    elif where == "resources":
        data["stages"][3]["runtime"]["resources"][key] = value
    elif where == "process":
        data["processes"] = {"vocoder": {key: value}}
    elif where == "placement":
        data["placement"] = {key: value}
    elif where == "edge":
        data["process_local_edges"] = [{"src": "preprocessing", "dst": "audio_encoder", "reason": "r", key: value}]


UNKNOWN_KEYS = [
    ("top", "placment", "placment", "placement"),
    ("top", "proccesses", "proccesses", "processes"),
    ("stage", "procss", "stages.vocoder.procss", "process"),
    ("stage", "stream_too", "stages.vocoder.stream_too", "stream_to"),
    ("runtime", "resource", "stages.vocoder.runtime.resource", "resources"),
    ("resources", "total_gpu_memory_fractio", "stages.vocoder.runtime.resources.total_gpu_memory_fractio", "total_gpu_memory_fraction"),
    ("process", "num_replica", "processes.vocoder.num_replica", "num_replicas"),
    ("process", "replica_device", "processes.vocoder.replica_device", "replica_devices"),
    ("placement", "num_gpu", "placement.num_gpu", "num_gpus"),
    ("placement", "require_memory_fraction_for_colocaton", "placement.require_memory_fraction_for_colocaton", "require_memory_fraction_for_colocation"),
    ("edge", "reasn", "process_local_edges.preprocessing->audio_encoder.reasn", "reason"),
]


@pytest.mark.parametrize("where,key,path,suggestion", UNKNOWN_KEYS, ids=[u[2] for u in UNKNOWN_KEYS])
def test_unknown_key_names_path_and_suggests(higgs, where, key, path, suggestion):
    _set(higgs, where, key, 1)
    error = raises_config_error(raw_config, higgs)
    issue = single_issue(error, path)
    assert issue.rule == "unknown key"
    assert f"did you mean {suggestion!r}" in issue.fix
    assert issue.value == 1


def test_every_unknown_key_is_reported_at_once(higgs):
    for where, key, _, _ in UNKNOWN_KEYS:
        if where in ("process", "placement", "edge"):
            continue
        _set(higgs, where, key, 1)
    higgs["processes"] = {"vocoder": {"num_replica": 1}}
    higgs["placement"] = {"num_gpu": 1}
    error = raises_config_error(raw_config, higgs)
    assert {i.path for i in error.issues} == {
        "placment", "proccesses", "stages.vocoder.procss", "stages.vocoder.stream_too",
        "stages.vocoder.runtime.resource", "stages.vocoder.runtime.resources.total_gpu_memory_fractio",
        "processes.vocoder.num_replica", "placement.num_gpu",
    }
    assert error.render().startswith("8 errors in the configuration:")


def test_unknown_key_without_close_match_lists_valid_keys(higgs):
    higgs["stages"][0]["zzzz"] = 1
    issue = single_issue(raises_config_error(raw_config, higgs), "stages.preprocessing.zzzz")
    assert issue.fix.startswith("use one of the valid keys here:")
    assert "process" in issue.fix and "factory" in issue.fix


# --- types and ranges ----------------------------------------------------------------------

TYPE_ERRORS = [
    (("stages", 2, "tp_size"), "two", "stages.tts_engine.tp_size"),
    (("stages", 2, "tp_size"), 1.5, "stages.tts_engine.tp_size"),
    (("stages", 2, "gpu"), True, "stages.tts_engine.gpu"),
    (("stages", 2, "gpu"), "0", "stages.tts_engine.gpu"),
    (("stages", 2, "gpu"), [], "stages.tts_engine.gpu"),
    (("stages", 2, "gpu"), [0, "1"], "stages.tts_engine.gpu"),
    (("stages", 2, "factory"), "not a dotted path", "stages.tts_engine.factory"),
    (("stages", 2, "factory"), 12, "stages.tts_engine.factory"),
    (("stages", 2, "merge_fn"), "bad path!", "stages.tts_engine.merge_fn"),
    (("stages", 2, "route_fn"), "a..b", "stages.tts_engine.route_fn"),
    (("stages", 2, "terminal"), [1], "stages.tts_engine.terminal"),
    (("stages", 2, "next"), 5, "stages.tts_engine.next"),
    (("stages", 2, "factory_args"), [1, 2], "stages.tts_engine.factory_args"),
    (("stages", 2, "process"), 7, "stages.tts_engine.process"),
    (("stages", 2, "process"), "", "stages.tts_engine.process"),
    (("stages", 2, "process"), "has space", "stages.tts_engine.process"),
    (("stages", 2, "runtime"), 3, "stages.tts_engine.runtime"),
    (("stages", 2, "runtime", "resources", "total_gpu_memory_fraction"), "lots", "stages.tts_engine.runtime.resources.total_gpu_memory_fraction"),
    (("stages", 3, "env", "OMNI_VOCODER_CHUNK"), 2048, "stages.vocoder.env.OMNI_VOCODER_CHUNK"),
    (("placement",), [], "placement"),
    (("placement", "require_memory_fraction_for_colocation"), "sometimes", "placement.require_memory_fraction_for_colocation"),
    (("processes",), [], "processes"),
    (("name",), 3, "name"),
]


def _put(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    node: Any = data
    for part in path[:-1]:
        if isinstance(node, dict) and part not in node:
            node[part] = {}
        node = node[part]
    node[path[-1]] = value


@pytest.mark.parametrize("where,value,path", TYPE_ERRORS, ids=[f"{t[2]}={t[1]!r}" for t in TYPE_ERRORS])
def test_wrong_type_names_the_exact_path(higgs, where, value, path):
    _put(higgs, where, value)
    error = raises_config_error(raw_config, higgs)
    assert path in issues_by_path(error), [i.path for i in error.issues]
    issue = issues_by_path(error)[path][0]
    assert issue.has_value and issue.value == value
    assert issue.rule and issue.fix


RANGES = [
    (("stages", 2, "tp_size"), 0, "stages.tts_engine.tp_size"),
    (("stages", 2, "gpu"), -1, "stages.tts_engine.gpu"),
    (("stages", 2, "gpu"), [0, -2], "stages.tts_engine.gpu"),
    (("stages", 2, "runtime", "resources", "total_gpu_memory_fraction"), 0, "stages.tts_engine.runtime.resources.total_gpu_memory_fraction"),
    (("stages", 2, "runtime", "resources", "total_gpu_memory_fraction"), -0.1, "stages.tts_engine.runtime.resources.total_gpu_memory_fraction"),
    (("stages", 2, "runtime", "resources", "total_gpu_memory_fraction"), 1.5, "stages.tts_engine.runtime.resources.total_gpu_memory_fraction"),
    (("processes", "vocoder", "num_replicas"), 0, "processes.vocoder.num_replicas"),
    (("processes", "vocoder", "replica_devices"), [1, -1], "processes.vocoder.replica_devices"),
    (("placement", "max_total_gpu_memory_fraction_per_gpu"), 0, "placement.max_total_gpu_memory_fraction_per_gpu"),
    (("placement", "max_total_gpu_memory_fraction_per_gpu"), 1.01, "placement.max_total_gpu_memory_fraction_per_gpu"),
    (("placement", "num_gpus"), 0, "placement.num_gpus"),
]


@pytest.mark.parametrize("where,value,path", RANGES, ids=[f"{r[2]}={r[1]!r}" for r in RANGES])
def test_out_of_range_names_the_exact_path(higgs, where, value, path):
    _put(higgs, where, value)
    issue = single_issue(raises_config_error(raw_config, higgs), path)
    assert issue.value == value


def test_fraction_of_exactly_one_and_limit_of_one_are_allowed(higgs):
    higgs["stages"][2]["runtime"]["resources"]["total_gpu_memory_fraction"] = 1
    higgs["placement"] = {"max_total_gpu_memory_fraction_per_gpu": 1}
    config = raw_config(higgs)
    assert config.stage("tts_engine").memory_fraction == 1.0


def test_replica_devices_single_int_becomes_a_list(higgs):
    higgs["processes"] = {"vocoder": {"replica_devices": 3}}
    assert raw_config(higgs).processes["vocoder"].replica_devices == [3]


def test_missing_required_fields(higgs):
    del higgs["stages"][1]["factory"]
    higgs["process_local_edges"] = [{"src": "preprocessing", "dst": "audio_encoder"}]
    error = raises_config_error(raw_config, higgs)
    factory = single_issue(error, "stages.audio_encoder.factory")
    assert factory.rule == "required field is missing"
    assert single_issue(error, "process_local_edges.preprocessing->audio_encoder.reason").rule == "required field is missing"


def test_stage_without_name_is_reported_by_index(higgs):
    del higgs["stages"][1]["name"]
    error = raises_config_error(raw_config, higgs)
    assert "stages[1].name" in issues_by_path(error)


def test_empty_stage_list_and_empty_reason_are_rejected(higgs):
    data = {"stages": []}
    assert "stages" in issues_by_path(raises_config_error(raw_config, data))
    higgs["process_local_edges"] = [{"src": "preprocessing", "dst": "audio_encoder", "reason": ""}]
    single_issue(raises_config_error(raw_config, higgs), "process_local_edges.preprocessing->audio_encoder.reason")


@pytest.mark.parametrize("factory", ["pkg.mod:fn", "pkg.mod.fn", "pkg:Cls.method", "mod:fn"])
def test_factory_dotted_forms_accepted(higgs, factory):
    higgs["stages"][0]["factory"] = factory
    assert raw_config(higgs).stage("preprocessing").factory == factory


# --- names: reserved @r<digits>, charset -------------------------------------------------------

@pytest.mark.parametrize("name", ["vocoder@r1", "x@r0", "a@r12b"])
def test_reserved_replica_suffix_in_stage_name(higgs, name):
    higgs["stages"][3]["name"] = name
    issue = single_issue(raises_config_error(raw_config, higgs), f"stages.{name}.name")
    assert "'@r<digits>' is reserved" in issue.rule
    assert issue.value == name


@pytest.mark.parametrize("name", ["vocoder@r1", "p@r0"])
def test_reserved_replica_suffix_in_process_name(higgs, name):
    higgs["stages"][3]["process"] = name
    issue = single_issue(raises_config_error(raw_config, higgs), "stages.vocoder.process")
    assert "'@r<digits>' is reserved" in issue.rule and "process name" in issue.rule


def test_reserved_replica_suffix_in_processes_key(higgs):
    higgs["processes"] = {"vocoder@r2": {"num_replicas": 2}}
    issue = single_issue(raises_config_error(raw_config, higgs), "processes.vocoder@r2")
    assert "'@r<digits>' is reserved" in issue.rule


@pytest.mark.parametrize("name", ["my stage", "a/b", "", "-lead", "é"])
def test_stage_name_charset(higgs, name):
    higgs["stages"][3]["name"] = name
    error = raises_config_error(raw_config, higgs)
    assert any(i.path.endswith(".name") and i.value == name for i in error.issues), [i.path for i in error.issues]


@pytest.mark.parametrize("name", ["vocoder", "voc-2", "a.b", "123", "_x", "Vocoder_2"])
def test_ordinary_names_are_accepted(higgs, name):
    higgs["stages"][3]["process"] = name
    assert raw_config(higgs).stage("vocoder").process == name


def test_all_fixtures_are_valid_configs():
    for name in ("higgs_tts", "qwen3_tts", "ming_omni_tts"):
        assert raw_config(fixture_dict(name)).stages


def test_raw_config_does_not_mutate_input(higgs):
    before = fixture_dict("higgs_tts")
    raw_config(higgs, ["--stages.vocoder.process", "elsewhere"])
    assert higgs == before


def test_issue_render_and_to_dict_shape(higgs):
    higgs["stages"][3]["procss"] = "x"
    error = raises_config_error(raw_config, higgs)
    assert isinstance(error, ConfigError) and error.exit_code == 1
    text = error.render()
    assert text.splitlines()[0] == "1 error in the configuration:"
    assert "error: stages.vocoder.procss = 'x'" in text
    assert "  rule: unknown key" in text
    assert "  fix:  did you mean 'process'?" in text
    assert error.to_dict() == {
        "valid": False,
        "errors": [{"path": "stages.vocoder.procss", "rule": "unknown key", "fix": error.issues[0].fix, "value": "x"}],
    }
