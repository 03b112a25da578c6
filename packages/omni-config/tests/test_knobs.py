"""Knobs: the type and range a model declares for each factory_args value an operator may set,
checked before anything starts, from the model file, a deployment file and the command line."""

from __future__ import annotations

import pytest
from config_helpers import issues_by_path, raises_config_error, single_issue

from omni_config import load_config, raw_config

MODEL = """\
    name: knobbed
    stages:
      - name: tts_engine
        factory: pkg.stages:build_engine
        next: vocoder
        factory_args: {model: m1, max_batch_size: 32, temperature: 0.8, load_format: dummy, max_batch_tokens: null, warm: true}
        knobs:
          max_batch_size: {type: int, min: 1, max: 4096, help: requests decoded together}
          temperature: {type: float, min: 0, max: 10}
          load_format: {type: str, choices: [dummy, safetensors]}
          max_batch_tokens: {type: int, min: 1, nullable: true}
          warm: {type: bool}
      - name: vocoder
        factory: pkg.stages:build_vocoder
        terminal: true
        factory_args: {sample_rate: 24000}
        knobs:
          sample_rate: {type: int, min: 8000, max: 192000, help: output sample rate in Hz}
    """


@pytest.fixture
def model(write):
    return write("models/knobbed.yaml", MODEL)


def test_declared_knobs_are_settable_and_keep_their_types(model):
    config = load_config(model, ["--stages.tts_engine.factory_args.max_batch_size", "16", "--stages.tts_engine.factory_args.temperature", "1",
                                 "--stages.tts_engine.factory_args.max_batch_tokens", "4096", "--stages.vocoder.factory_args.sample_rate=48000"])
    engine = config.stage("tts_engine")
    assert engine.factory_args == {"model": "m1", "max_batch_size": 16, "temperature": 1, "load_format": "dummy", "max_batch_tokens": 4096, "warm": True}
    assert config.stage("vocoder").factory_args == {"sample_rate": 48000}
    assert engine.knobs["max_batch_size"].max == 4096


def test_sample_rate_zero_is_a_config_error_with_path_value_rule_and_fix(model):
    error = raises_config_error(load_config, model, ["--stages.vocoder.factory_args.sample_rate", "0"])
    issue = single_issue(error, "stages.vocoder.factory_args.sample_rate")
    assert issue.value == 0
    assert issue.rule == "sample_rate must be an integer between 8000 and 192000 (the knob: output sample rate in Hz)"
    assert issue.fix == "set stages.vocoder.factory_args.sample_rate to an integer between 8000 and 192000"
    assert issue.where == "command line (--stages.vocoder.factory_args.sample_rate)"


def test_every_bad_value_is_reported_at_once(model, write):
    deploy = write("deploy.yaml", """\
        extends: models/knobbed.yaml
        stages:
          - name: tts_engine
            factory_args: {max_batch_size: 0, temperature: hot, load_format: pt, max_batch_tokens: 2.5, warm: 1}
        """)
    error = raises_config_error(load_config, deploy, ["--stages.vocoder.factory_args.sample_rate", "-5"])
    paths = issues_by_path(error)
    assert set(paths) == {f"stages.tts_engine.factory_args.{k}" for k in ("max_batch_size", "temperature", "load_format", "max_batch_tokens", "warm")} | {
        "stages.vocoder.factory_args.sample_rate"
    }
    load_format = single_issue(error, "stages.tts_engine.factory_args.load_format")
    assert load_format.rule == "load_format must be one of 'dummy', 'safetensors'" and load_format.value == "pt"
    assert load_format.source == str(deploy) and load_format.line == 4  # the deployment file's line
    assert single_issue(error, "stages.tts_engine.factory_args.warm").rule == "warm must be true or false"  # 1 is not a bool
    assert single_issue(error, "stages.tts_engine.factory_args.max_batch_tokens").rule == "max_batch_tokens must be an integer >= 1, or null"


def test_null_only_where_the_knob_allows_it(model):
    load_config(model, ["--stages.tts_engine.factory_args.max_batch_tokens", "null"])
    error = raises_config_error(load_config, model, ["--stages.tts_engine.factory_args.max_batch_size", "null"])
    assert single_issue(error, "stages.tts_engine.factory_args.max_batch_size").value is None


def test_an_undeclared_knob_or_a_fixed_argument_is_refused_by_name(model):
    error = raises_config_error(load_config, model, ["--stages.tts_engine.factory_args.max_batch", "2", "--stages.tts_engine.factory_args.model", "m2"])
    typo = single_issue(error, "stages.tts_engine.factory_args.max_batch")
    assert "declares no knob 'max_batch'" in typo.rule and "did you mean 'max_batch_size'" in typo.fix
    fixed = single_issue(error, "stages.tts_engine.factory_args.model")
    assert "fixed by the model, not a knob" in fixed.rule and fixed.value == "m2"


def test_the_models_own_default_is_checked_too(write):
    bad = write("bad.yaml", MODEL.replace("sample_rate: 24000}", "sample_rate: 0}"))
    issue = single_issue(raises_config_error(load_config, bad), "stages.vocoder.factory_args.sample_rate")
    assert issue.source == str(bad) and issue.line is not None


def test_a_knob_needs_its_default_and_a_consistent_declaration(write):
    missing = write("missing.yaml", MODEL.replace("warm: true}", "}"))
    issue = single_issue(raises_config_error(load_config, missing), "stages.tts_engine.knobs.warm")
    assert "has no default" in issue.rule and "add factory_args.warm" in issue.fix
    inconsistent = write("inconsistent.yaml", MODEL.replace("warm: {type: bool}", "warm: {type: bool, min: 1}").replace("max: 4096,", "max: 0,"))
    error = raises_config_error(load_config, inconsistent)
    assert "min and max apply to int and float knobs" in single_issue(error, "stages.tts_engine.knobs.warm").rule
    assert "min (1) is above max (0)" in single_issue(error, "stages.tts_engine.knobs.max_batch_size").rule
    typo = write("typo.yaml", MODEL.replace("warm: {type: bool}", "warm: {type: bool, nullabel: true}"))
    assert "did you mean 'nullable'" in single_issue(raises_config_error(load_config, typo), "stages.tts_engine.knobs.warm.nullabel").fix


def test_knobs_belong_to_the_model_tier(model):
    error = raises_config_error(load_config, model, ["--stages.vocoder.knobs", "{}"])
    assert "belongs to the model tier" in single_issue(error, "stages.vocoder.knobs").rule


def test_stages_without_knobs_keep_unchecked_factory_args(higgs):
    config = raw_config(higgs, ["--stages.tts_engine.factory_args.max_batch_size", "0"])
    assert config.stage("tts_engine").factory_args["max_batch_size"] == 0

