"""Property-based: no input makes omni-config raise anything but its own config errors.

Random config dicts, random deployment files, random YAML bytes and random override
token lists go through ``raw_config`` / ``load_config``; the only acceptable outcomes
are a ``PipelineConfig`` or a ``ConfigError`` / ``ConfigFileError`` whose issues are
all printable and JSON-serialisable.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import yaml
from config_helpers import FIXTURES, fixture_dict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omni_config import ConfigError, ConfigFileError, PipelineConfig, load_config, raw_config

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = st.one_of(
    st.sampled_from(["preprocessing", "audio_encoder", "tts_engine", "vocoder", "a", "b", "p@r1", "x.y", "123", "", " ", "tts_frontend", "pipeline"]),
    st.text(max_size=6),
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 8), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))
ANY = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)), max_leaves=8)
NAME_LISTS = st.one_of(NAMES, st.lists(NAMES, max_size=3), ANY)

STAGE_FIELDS = {
    "factory": st.one_of(st.sampled_from(["m.s:build", "pkg.mod.fn", "bad path", "a:", ":b"]), ANY),
    "next": NAME_LISTS,
    "stream_to": NAME_LISTS,
    "wait_for": NAME_LISTS,
    "terminal": st.one_of(st.booleans(), ANY),
    "merge_fn": st.one_of(st.sampled_from(["m.s:merge", "nope!"]), ANY),
    "route_fn": st.one_of(st.sampled_from(["m.s:route"]), ANY),
    "factory_args": st.one_of(st.dictionaries(st.text(max_size=5), ANY, max_size=3), ANY),
    "env": st.one_of(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2), ANY),
    "process": st.one_of(NAMES, ANY),
    "gpu": st.one_of(st.integers(-1, 4), st.lists(st.integers(-1, 4), max_size=3), ANY),
    "tp_size": st.one_of(st.integers(-1, 4), ANY),
    "runtime": st.one_of(
        st.fixed_dictionaries({"resources": st.fixed_dictionaries({}, optional={"total_gpu_memory_fraction": st.one_of(st.floats(-1, 2), ANY)})}),
        ANY,
    ),
    "procss": ANY,
}
STAGE = st.one_of(st.fixed_dictionaries({"name": st.one_of(NAMES, ANY)}, optional=STAGE_FIELDS), ANY)
PROCESS = st.one_of(
    st.fixed_dictionaries({}, optional={
        "num_replicas": st.one_of(st.integers(-1, 4), ANY),
        "replica_devices": st.one_of(st.lists(st.integers(-1, 4), max_size=5), st.integers(-1, 4), ANY),
        "num_replica": ANY,
    }),
    ANY,
)
PLACEMENT = st.one_of(
    st.fixed_dictionaries({}, optional={
        "max_total_gpu_memory_fraction_per_gpu": st.one_of(st.floats(-1, 2), ANY),
        "require_memory_fraction_for_colocation": st.one_of(st.booleans(), ANY),
        "num_gpus": st.one_of(st.integers(-1, 8), ANY),
    }),
    ANY,
)
EDGE = st.one_of(st.fixed_dictionaries({"src": NAMES, "dst": NAMES}, optional={"reason": st.one_of(st.text(max_size=8), ANY)}), ANY)
CONFIG = st.one_of(
    st.fixed_dictionaries({"stages": st.one_of(st.lists(STAGE, max_size=6), ANY)}, optional={
        "name": st.one_of(NAMES, ANY),
        "entry_stage": st.one_of(NAMES, ANY),
        "processes": st.one_of(st.dictionaries(NAMES, PROCESS, max_size=3), ANY),
        "placement": PLACEMENT,
        "process_local_edges": st.one_of(st.lists(EDGE, max_size=3), ANY),
        "extends": ANY,
        "stagez": ANY,
    }),
    st.dictionaries(st.text(max_size=6), ANY, max_size=4),
)

FLAGS = st.sampled_from([
    "--stages.vocoder.process", "--stages.tts_engine.gpu", "--stages.tts_engine.tp_size", "--stages.vocoder.next",
    "--stages.vocoder.runtime.resources.total_gpu_memory_fraction", "--stages.tts_engine.factory_args.max_batch_size",
    "--stages.tts_engine.factory_args.nope", "--processes.vocoder.num_replicas", "--processes.vocoder.replica_devices",
    "--processes.x.y.num_replicas", "--placement.num_gpus", "--placement.require_memory_fraction_for_colocation",
    "--placement.max_total_gpu_memory_fraction_per_gpu", "--stages.vocodr.process", "--stages", "--", "-", "--a.b=",
    "--stages..gpu", "--entry_stage.x", "--process_local_edges.0.src", "--stages.vocoder",
])
VALUES = st.one_of(
    st.sampled_from(["0", "1,2", "[1,2]", "[1", "]", "-1", "0.5", "true", "null", "{a: 1}", "", ",", "[[]]", "1,,2", "!!python/none", "&a *a", "'", "\t"]),
    st.text(max_size=8),
)
TOKENS = st.lists(st.one_of(FLAGS, VALUES, st.builds(lambda f, v: f"{f}={v}", FLAGS, VALUES)), max_size=8)


def _check_error(error: ConfigError) -> None:
    assert error.issues, "a ConfigError must carry at least one issue"
    for issue in error.issues:
        assert isinstance(issue.path, str)  # empty only for a key that is itself empty
        assert isinstance(issue.rule, str) and issue.rule
        assert isinstance(issue.fix, str) and issue.fix
        issue.render()
    json.dumps(error.to_dict())
    assert error.render().splitlines()[0].endswith("in the configuration:")


@SETTINGS
@given(CONFIG)
def test_random_config_dicts_only_raise_config_error(data):
    try:
        result = raw_config(data)
    except ConfigError as error:
        _check_error(error)
    else:
        assert isinstance(result, PipelineConfig)


@SETTINGS
@given(TOKENS)
def test_random_override_tokens_only_raise_config_error(tokens):
    try:
        result = raw_config(fixture_dict("higgs_tts"), tokens)
    except ConfigError as error:
        _check_error(error)
    else:
        assert isinstance(result, PipelineConfig)


@SETTINGS
@given(st.one_of(CONFIG, st.fixed_dictionaries({"extends": st.just("higgs_tts.yaml"), "stages": st.lists(STAGE, max_size=4)}, optional={
    "processes": st.one_of(st.dictionaries(NAMES, PROCESS, max_size=3), ANY), "placement": PLACEMENT, "process_local_edges": ANY, "entry_stage": ANY,
})), TOKENS)
def test_random_deployment_files_only_raise_config_errors(data, tokens):
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "higgs_tts.yaml").write_text((FIXTURES / "higgs_tts.yaml").read_text())
        path = Path(tmp) / "deploy.yaml"
        path.write_text(yaml.safe_dump(data))
        try:
            result = load_config(path, tokens)
        except ConfigError as error:
            _check_error(error)
        except ConfigFileError as error:
            assert error.exit_code == 2 and error.reason and error.fix
        else:
            assert isinstance(result, PipelineConfig)


@SETTINGS
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(lambda t: t.encode("utf-8", "replace"))))
def test_random_file_bytes_only_raise_config_errors(content):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.yaml"
        path.write_bytes(content)
        try:
            load_config(path)
        except ConfigError as error:
            _check_error(error)
        except ConfigFileError as error:
            assert error.exit_code == 2 and error.reason and error.fix


def test_regressions_found_by_hypothesis(higgs):
    """A top-level key spelt like pydantic's '[key]' marker; a non-string stage name next to a CLI override."""
    for data, tokens in [
        ({"[key]": None}, []),
        ({"stages": [{"name": []}]}, ["--stages.vocoder.runtime.resources.total_gpu_memory_fraction=0"]),
        ({"stages": [{"name": {"a": 1}, "factory": "m:x"}]}, ["--stages.a.b.c", "1"]),
    ]:
        try:
            raw_config(data, tokens)
        except ConfigError as error:
            _check_error(error)
