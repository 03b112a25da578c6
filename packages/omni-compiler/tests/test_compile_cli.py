"""`omni-compile validate|show|schema`: output formats and exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from compiler_helpers import FIXTURES, compiled, fixture_dict

from omni_compiler import CompiledTopology
from omni_config import registry

HIGGS = FIXTURES / "higgs_tts.yaml"
QWEN3 = FIXTURES / "qwen3_tts.yaml"
HIGGS_TABLE = "tts_frontend : preprocessing, audio_encoder\npipeline     : tts_engine\nvocoder      : vocoder"
QWEN_REASON = "prepared requests live in _PREPROCESSING_CONTEXT / _PREPARED_REQUESTS, read in-process by the AR engine builder"


# --- validate ------------------------------------------------------------------------------

def test_validate_valid_prints_the_table(cli):
    code, out, err = cli("validate", HIGGS)
    assert code == 0 and err == ""
    assert out.startswith(HIGGS_TABLE + "\n")
    assert f"valid: {HIGGS} (3 OS process(es), 2 cross-process edge(s))" in out


def test_validate_invalid_prints_every_error(cli, model_files, write):
    deploy = write("split.yaml", """\
        extends: qwen3_tts.yaml
        stages:
          - name: preprocessing
            process: frontend
        """)
    code, out, err = cli("validate", deploy, "--stages.vocodr.gpu", "1", "--processes.vocoder.num_replica=2")
    assert code == 1 and out == ""
    assert err.startswith("2 errors in the configuration:")
    assert "error: stages.vocodr = 'vocodr'" in err
    assert "did you mean 'vocoder'?" in err
    assert "error: processes.vocoder.num_replica = '2'" in err


def test_validate_forbidden_split_names_edge_reason_and_fix(cli, model_files, write):
    deploy = write("split.yaml", "extends: qwen3_tts.yaml\nstages:\n  - name: preprocessing\n    process: frontend\n")
    code, _out, err = cli("validate", deploy)
    assert code == 1
    assert err.splitlines() == [
        "1 error in the configuration:",
        "error: stages.preprocessing.process = 'frontend'",
        f"  rule: the edge preprocessing -> tts_engine must stay inside one OS process ({QWEN_REASON}), but preprocessing runs in 'frontend' and tts_engine in 'pipeline'",
        "  fix:  --stages.preprocessing.process pipeline  (or set process: pipeline on preprocessing in your deployment file)",
        f"  in:   {deploy}:4:14",  # the compiler's error points at the line that split the stages
    ]


def test_validate_json_valid(cli, higgs):
    code, out, _ = cli("validate", HIGGS, "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["valid"] is True
    assert data["table"] == HIGGS_TABLE.splitlines()
    assert CompiledTopology.from_dict(data["topology"]) == compiled(higgs)


def test_validate_json_invalid_goes_to_stdout(cli):
    code, out, err = cli("validate", QWEN3, "--format=json", "--stages.preprocessing.process", "frontend", "--stages.tts_engine.next", "x")
    assert code == 1 and err == ""
    data = json.loads(out)
    assert data["valid"] is False
    assert [e["path"] for e in data["errors"]] == ["stages.tts_engine.next"]  # the loader stops before compiling
    assert set(data["errors"][0]) == {"path", "rule", "fix", "value", "source"}


def test_validate_json_contract_error_fields(cli):
    code, out, _ = cli("validate", QWEN3, "--format", "json", "--stages.preprocessing.process=frontend")
    assert code == 1
    (error,) = json.loads(out)["errors"]
    assert error == {
        "path": "stages.preprocessing.process",
        "rule": f"the edge preprocessing -> tts_engine must stay inside one OS process ({QWEN_REASON}), but preprocessing runs in 'frontend' and tts_engine in 'pipeline'",
        "fix": "--stages.preprocessing.process pipeline  (or set process: pipeline on preprocessing in your deployment file)",
        "value": "frontend",
        "source": "command line",  # the flag that split the stages, not the model file's line
    }


def test_overrides_may_come_before_the_file(cli):
    code, out, _ = cli("validate", "--stages.vocoder.process", "pipeline", HIGGS)
    assert code == 0
    assert out.startswith("tts_frontend : preprocessing, audio_encoder\npipeline     : tts_engine, vocoder\n")


def test_override_missing_its_value_before_another_option(cli):
    code, out, _ = cli("validate", HIGGS, "--stages.vocoder.process", "--format", "json")
    assert code == 1
    assert json.loads(out)["errors"] == [{
        "path": "stages.vocoder.process", "rule": "an override needs a value",
        "fix": "write --stages.vocoder.process VALUE or --stages.vocoder.process=VALUE", "source": "command line",
    }]


def test_gpus_option(cli):
    assert cli("validate", HIGGS, "--gpus", "1")[0] == 0
    code, _, err = cli("validate", HIGGS, "--gpus", "1", "--stages.vocoder.gpu", "1")
    assert code == 1 and "error: stages.vocoder.gpu = 1" in err and "does not exist on a machine with 1 GPU(s)" in err


def test_registered_model_name_as_file(cli, monkeypatch):
    monkeypatch.setitem(registry._registered, "test/higgs", HIGGS)
    code, out, _ = cli("show", "test/higgs")
    assert code == 0 and out.startswith(HIGGS_TABLE)


# --- exit code 2: files and usage ----------------------------------------------------------

@pytest.mark.parametrize("content,reason", [
    ("stages: [\n", "YAML syntax error at line"),
    ("", "the file is empty"),
    ("- 1\n", "the top level is a list"),
])
def test_unreadable_config_exits_2(cli, write, content, reason):
    path = write("bad.yaml", content)
    code, out, err = cli("validate", path)
    assert code == 2 and out == ""
    assert err.startswith(f"error: cannot load {path}: {reason}")


def test_missing_file_exits_2_with_model_hint(cli, tmp_path):
    code, _, err = cli("show", tmp_path / "missing.yaml")
    assert code == 2
    assert "no such file" in err and "pass the model's pipeline file path instead" in err


def test_file_error_in_json_format(cli, write):
    code, out, _ = cli("validate", write("bad.yaml", "a: [\n"), "--format", "json")
    assert code == 2
    data = json.loads(out)
    assert data["valid"] is False and data["errors"][0]["rule"].startswith("YAML syntax error")


@pytest.mark.parametrize("argv", [
    [],
    ["frobnicate"],
    ["validate"],
    ["validate", str(HIGGS), "--format", "mermaid"],
    ["show", str(HIGGS), "--format", "xml"],
    ["validate", str(HIGGS), "--gpus", "two"],
    ["validate", str(HIGGS), "--gpus", "0"],
    ["validate", str(HIGGS), "extra-positional"],
    ["schema", "--stages.vocoder.process", "x"],
    ["validate", str(HIGGS), "--unknown-flag"],
])
def test_usage_errors_exit_2(cli, argv):
    code, _out, err = cli(*argv)
    assert code == 2
    assert err  # argparse or the CLI explains the usage


def test_help_exits_0(cli):
    code, out, _ = cli("--help")
    assert code == 0 and "validate" in out and "exit codes" in out
    code, out, _ = cli("show", "--help")
    assert code == 0 and "--stages.NAME.process" in out


def test_internal_failure_is_exit_2_without_traceback(cli, monkeypatch):
    from omni_compiler import cli as cli_module

    def boom(*args, **kwargs):
        raise RuntimeError("unexpected")

    monkeypatch.setattr(cli_module, "compile", boom)
    code, _out, err = cli("validate", HIGGS)
    assert code == 2
    assert err.strip() == "omni-compile: internal error: RuntimeError: unexpected (set OMNI_DEBUG=1 for a traceback)"
    monkeypatch.setenv("OMNI_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli_module.main(["validate", str(HIGGS)])


# --- show ------------------------------------------------------------------------------------

def test_show_text_sections(cli):
    code, out, _ = cli("show", HIGGS)
    assert code == 0
    table, edges, budget = out.rstrip("\n").split("\n\n")
    assert table == HIGGS_TABLE
    assert edges.splitlines() == [
        "cross-process edges (2):",
        "  audio_encoder -> tts_engine  next             tts_frontend -> pipeline",
        "  tts_engine -> vocoder        next, stream_to  pipeline -> vocoder",
    ]
    rows = budget.splitlines()
    assert rows[0] == "GPU budget:"
    assert rows[1].split() == ["gpu", "processes", "declared", "fractions", "total", "limit"]
    assert rows[2].split() == ["0", "tts_frontend,", "pipeline,", "vocoder", "tts_frontend/audio_encoder=0.03,", "pipeline/tts_engine=0.85,", "vocoder/vocoder=0.1", "0.98", "1"]


def test_show_text_replicas_and_tp(cli):
    code, out, _ = cli("show", HIGGS, "--processes.vocoder.num_replicas", "2", "--processes.vocoder.replica_devices", "1,2",
                       "--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,3")
    assert code == 0
    sections = out.rstrip("\n").split("\n\n")
    assert sections[0] == (
        "tts_frontend : preprocessing, audio_encoder\n"
        "pipeline_tp0 : tts_engine (tp rank 0 of 2)\n"
        "pipeline_tp1 : tts_engine (tp rank 1 of 2)\n"
        "vocoder      : vocoder"
    )
    assert sections[1] == "replicas:\n  vocoder: 2 replica(s) -> vocoder@r0 (GPU 1), vocoder@r1 (GPU 2)"
    assert sections[2] == "tensor parallel:\n  tts_engine: tp_size 2, one OS process per rank: pipeline_tp0, pipeline_tp1"
    assert sections[3].splitlines()[0] == "cross-process edges (2):"
    assert "pipeline_tp0/pipeline_tp1 -> vocoder" in sections[3]
    assert [line.split()[0] for line in sections[4].splitlines()[2:]] == ["0", "1", "2", "3"]


def test_show_text_no_cross_edges_and_no_gpus(cli, write):
    path = write("cpu.yaml", """\
        stages:
          - {name: a, factory: m.x:a, next: b, process: p}
          - {name: b, factory: m.x:b, terminal: true, process: p}
        """)
    code, out, _ = cli("show", path)
    assert code == 0
    assert out.rstrip("\n").split("\n\n") == [
        "p : a, b",
        "cross-process edges (0):\n  none: every handoff stays inside one OS process",
        "GPU budget:\n  no GPU stages",
    ]


def test_show_json_round_trip(cli, higgs):
    code, out, _ = cli("show", HIGGS, "--format", "json", "--processes.vocoder.num_replicas", "2", "--processes.vocoder.replica_devices", "[1,2]")
    assert code == 0
    assert CompiledTopology.from_dict(json.loads(out)["topology"]) == compiled(higgs, ["--processes.vocoder.num_replicas", "2", "--processes.vocoder.replica_devices", "1,2"])


def test_show_mermaid(cli):
    code, out, _ = cli("show", HIGGS, "--format", "mermaid")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "flowchart LR"
    assert sum(line.strip().startswith("subgraph ") for line in lines) == 3
    assert sum(line.strip() == "end" for line in lines) == 3
    assert '  n_preprocessing -->|"next"| n_audio_encoder' in lines
    assert '  n_audio_encoder -->|"next (cross-process)"| n_tts_engine' in lines
    assert '  n_tts_engine ==>|"next, stream_to (cross-process)"| n_vocoder' in lines


def test_show_mermaid_tp_nodes_per_rank(cli):
    code, out, _ = cli("show", HIGGS, "--format", "mermaid", "--stages.tts_engine.tp_size", "2", "--stages.tts_engine.gpu", "0,1")
    assert code == 0
    assert '  n_audio_encoder -->|"next (cross-process)"| n_tts_engine_tp0' in out
    assert '  n_audio_encoder -->|"next (cross-process)"| n_tts_engine_tp1' in out


def test_show_dot(cli):
    code, out, _ = cli("show", HIGGS, "--format", "dot")
    assert code == 0
    assert out.startswith('digraph "bosonai/higgs-tts-3-4b" {')
    assert out.count("{") == out.count("}")
    assert out.count("subgraph cluster_") == 3
    assert '  n_preprocessing -> n_audio_encoder [label="next", style=solid, color=black];' in out
    assert '  n_tts_engine -> n_vocoder [label="next, stream_to", style=bold, color=red];' in out


def test_show_dot_is_accepted_by_graphviz_when_installed(cli, tmp_path):
    dot = shutil.which("dot")
    if dot is None:
        pytest.skip("graphviz is not installed")
    _, out, _ = cli("show", HIGGS, "--format", "dot")
    result = subprocess.run([dot, "-Tsvg"], input=out, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


# --- schema ------------------------------------------------------------------------------------

def test_schema_is_valid_json_schema_accepting_the_fixtures(cli):
    code, out, _ = cli("schema")
    assert code == 0
    schema = json.loads(out)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for name in ("higgs_tts", "qwen3_tts", "ming_omni_tts"):
        assert list(validator.iter_errors(fixture_dict(name))) == []
    bad = fixture_dict("higgs_tts")
    bad["stages"][0]["procss"] = "x"
    assert list(validator.iter_errors(bad))


def test_schema_to_file(cli, tmp_path):
    target = tmp_path / "schema.json"
    code, out, _ = cli("schema", "-o", target)
    assert code == 0 and out == ""
    assert json.loads(target.read_text()) == json.loads(cli("schema")[1])


def test_schema_to_unwritable_path_exits_2(cli, tmp_path):
    code, _, err = cli("schema", "--output", tmp_path / "no" / "such" / "dir" / "s.json")
    assert code == 2 and "cannot write" in err


# --- the installed console script, in real subprocesses --------------------------------------

def _script() -> list[str]:
    candidate = Path(sys.executable).parent / "omni-compile"
    if candidate.exists():
        return [str(candidate)]
    found = shutil.which("omni-compile")
    return [found] if found else [sys.executable, "-m", "omni_compiler.cli"]


def _run(*argv, cwd=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OMNI_DEBUG"}
    return subprocess.run([*_script(), *map(str, argv)], capture_output=True, text=True, timeout=60, cwd=cwd, env=env)


def test_script_valid_exits_0():
    result = _run("show", HIGGS)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(HIGGS_TABLE + "\n")


def test_script_forbidden_split_exits_1(model_files, write):
    deploy = write("split.yaml", "extends: qwen3_tts.yaml\nstages:\n  - name: preprocessing\n    process: frontend\n")
    result = _run("validate", deploy)
    assert result.returncode == 1
    assert "error: stages.preprocessing.process = 'frontend'" in result.stderr
    assert QWEN_REASON in result.stderr
    assert "fix:  --stages.preprocessing.process pipeline" in result.stderr
    assert "Traceback" not in result.stderr


def test_script_yaml_syntax_and_usage_exit_2(write):
    broken = _run("validate", write("broken.yaml", "stages:\n  - {name: a\n"))
    assert broken.returncode == 2 and "YAML syntax error" in broken.stderr and "Traceback" not in broken.stderr
    usage = _run("validate")
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_script_json_and_relative_paths(model_files):
    result = _run("validate", "higgs_tts.yaml", "--format", "json", "--stages.vocoder.gpu=1", cwd=model_files)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["topology"]["stages"][3]["gpu"] == [1]


def test_version_is_the_package_version(cli):
    from importlib.metadata import version

    import omni_compiler

    code, out, _ = cli("--version")
    assert code == 0
    assert out.strip() == f"omni-compile {omni_compiler.__version__}"
    assert version("omni-compiler") == omni_compiler.__version__


@pytest.mark.parametrize(("args", "code"), [
    (["show", HIGGS, "--format", "json"], 0),
    (["validate", HIGGS, "--stages.vocoder.tp_size", "0"], 1),
    (["validate", "no-such-file.yaml"], 2),
])
def test_the_installed_command_flushes_everything_before_its_fast_exit(args, code):
    """`omni-compile` skips interpreter teardown (cli.entry): its whole output and exit code must survive it."""
    exe = shutil.which("omni-compile", path=str(Path(sys.executable).parent))
    assert exe, "omni-compile is not installed next to this interpreter"
    result = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert result.returncode == code, result.stderr
    if code == 0:
        assert json.loads(result.stdout)["valid"] is True  # parses to the end: nothing cut off
    else:
        assert result.stderr.endswith("\n") and "  fix:  " in result.stderr.splitlines()[-2] + result.stderr.splitlines()[-1]
