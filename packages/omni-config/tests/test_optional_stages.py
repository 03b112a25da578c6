"""Optional stages (the aligner): declared by the model, off and gone until a deployment switches them on."""

from __future__ import annotations

import pytest
from config_helpers import raises_config_error, single_issue

from omni_config import load_config

MODEL = """\
    name: aligned
    stages:
      - name: tts_engine
        factory: pkg.stages:build_engine
        next: vocoder
        stream_to: vocoder
      - name: vocoder
        factory: pkg.stages:build_vocoder
        next: aligner
        stream_to: aligner
        process: pipeline
      - name: aligner
        factory: pkg.stages:build_aligner
        optional: true
        terminal: true
        process: pipeline
        factory_args: {method: auto}
        knobs:
          method: {type: str, choices: [auto, events, forced]}
    process_local_edges:
      - {src: vocoder, dst: aligner, reason: shares a cache}
    """


@pytest.fixture
def model(write):
    return write("models/aligned.yaml", MODEL)


def test_an_optional_stage_is_off_by_default_and_its_feeder_is_terminal_again(model):
    config = load_config(model)
    assert config.stage_names == ("tts_engine", "vocoder")
    vocoder = config.stage("vocoder")
    assert vocoder.terminal and vocoder.next == [] and vocoder.stream_to == []
    assert config.process_local_edges == []  # the edge to a stage that is not there goes with it


def test_enabled_switches_it_on_from_the_command_line_with_its_placement_and_knobs(model):
    config = load_config(model, ["--stages.aligner.enabled", "true", "--stages.aligner.process", "aligner",
                                 "--stages.aligner.factory_args.method", "forced"])
    assert config.stage_names == ("tts_engine", "vocoder", "aligner")
    assert not config.stage("vocoder").terminal and config.stage("vocoder").next == ["aligner"]
    aligner = config.stage("aligner")
    assert aligner.terminal and aligner.process == "aligner" and aligner.factory_args["method"] == "forced"


def test_a_deployment_file_switches_it_on(model, write):
    deploy = write("deploy.yaml", """\
        extends: models/aligned.yaml
        stages:
          - {name: aligner, enabled: true}
        """)
    assert load_config(deploy).stage_names == ("tts_engine", "vocoder", "aligner")


def test_enabled_on_a_stage_that_is_not_optional_is_an_error_naming_it(model):
    error = raises_config_error(load_config, model, ["--stages.vocoder.enabled", "true"])
    issue = single_issue(error, "stages.vocoder.enabled")
    assert "not optional" in issue.rule and "aligner" in issue.fix


def test_optional_belongs_to_the_model_tier(model):
    error = raises_config_error(load_config, model, ["--stages.vocoder.optional", "true"])
    issue = single_issue(error, "stages.vocoder.optional")
    assert "model tier" in issue.rule


def test_a_knob_of_an_off_stage_is_still_checked_when_it_is_switched_on(model):
    error = raises_config_error(load_config, model, ["--stages.aligner.enabled", "true", "--stages.aligner.factory_args.method", "guess"])
    single_issue(error, "stages.aligner.factory_args.method")
