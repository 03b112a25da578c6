"""``processes.<P>.restart``: how the runtime restarts a process instance that died."""

from __future__ import annotations

import pytest
from config_helpers import issues_by_path, raises_config_error

from omni_config import load_config


def test_every_process_has_the_default_policy(model_dir):
    restart = load_config(model_dir / "higgs_tts.yaml", ["--processes.vocoder.num_replicas", "1"]).processes["vocoder"].restart
    assert (restart.max_restarts, restart.window_s, restart.backoff_s) == (5, 60.0, 1.0)


def test_deployment_file_sets_the_policy(model_dir, write):
    deploy = write("deploy.yaml", """\
        extends: models/higgs_tts.yaml
        processes:
          vocoder:
            restart: {max_restarts: 0}
          pipeline:
            restart: {max_restarts: 3, window_s: 10, backoff_s: 0.5}
        """)
    processes = load_config(deploy).processes
    assert processes["vocoder"].restart.max_restarts == 0
    assert (processes["vocoder"].restart.window_s, processes["vocoder"].restart.backoff_s) == (60.0, 1.0)
    assert (processes["pipeline"].restart.max_restarts, processes["pipeline"].restart.window_s, processes["pipeline"].restart.backoff_s) == (3, 10.0, 0.5)


def test_cli_sets_one_field_over_the_file(model_dir, write):
    deploy = write("deploy.yaml", """\
        extends: models/higgs_tts.yaml
        processes:
          vocoder: {restart: {max_restarts: 2, window_s: 30}}
        """)
    restart = load_config(deploy, ["--processes.vocoder.restart.max_restarts", "7"]).processes["vocoder"].restart
    assert (restart.max_restarts, restart.window_s) == (7, 30.0)


@pytest.mark.parametrize(
    ("yaml_restart", "path", "rule"),
    [
        ("{max_restarts: -1}", "processes.vocoder.restart.max_restarts", "greater than or equal to 0"),
        ("{window_s: 0}", "processes.vocoder.restart.window_s", "greater than 0"),
        ("{backoff_s: -0.5}", "processes.vocoder.restart.backoff_s", "greater than or equal to 0"),
        ("{max_restart: 3}", "processes.vocoder.restart.max_restart", "unknown"),
    ],
)
def test_invalid_policy_names_the_path_and_rule(model_dir, write, yaml_restart, path, rule):
    deploy = write("deploy.yaml", f"extends: models/higgs_tts.yaml\nprocesses:\n  vocoder:\n    restart: {yaml_restart}\n")
    error = raises_config_error(load_config, deploy)
    found = issues_by_path(error)
    assert path in found, error.render()
    assert rule in found[path][0].rule + found[path][0].fix, error.render()


def test_unknown_restart_field_on_the_cli_suggests_the_right_one(model_dir):
    error = raises_config_error(load_config, model_dir / "higgs_tts.yaml", ["--processes.vocoder.restart.backoff", "2"])
    (issue,) = error.issues
    assert issue.path == "processes.vocoder.restart.backoff"
    assert "restart.backoff_s" in issue.fix
