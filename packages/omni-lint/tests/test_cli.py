"""The command line: output formats, exit codes, --explain, settings in pyproject.toml."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES, chain, pipeline_yaml, write_tree


def _copy(fixture: str, tmp_path):
    target = tmp_path / fixture
    shutil.copytree(FIXTURES / fixture, target)
    return target


def test_text_output_is_sorted_path_line_col_code_message(cli):
    code, out, err = cli(".", cwd=FIXTURES / "context_pair")
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("qwenlike/stages.py:10:1: OL001 _PREPROCESSING_CONTEXT ")
    assert lines[1].startswith("qwenlike/stages.py:11:1: OL001 _PREPARED_REQUESTS ")
    assert lines == sorted(lines)
    assert "2 errors, 0 info in 2 model folders" in err


def test_clean_and_info_only_runs_exit_zero(cli):
    code, out, err = cli(".", cwd=FIXTURES / "codec_cache")
    assert (code, out) == (0, "")
    assert "0 errors, 0 info in 1 model folder" in err
    code, out, _ = cli(".", cwd=FIXTURES / "payload_only")
    assert code == 0
    assert out.startswith("voxtrallike/pipeline.yaml:13:5: OL100 declared process-local edge preprocessing -> tts_generation")


def test_json_format(cli):
    code, out, _ = cli("--format", "json", ".", cwd=FIXTURES / "payload_only")
    data = json.loads(out)
    assert code == 0
    assert data["summary"] == {"errors": 0, "warnings": 0, "info": 1, "suppressed": 0, "models": 1, "pipelines": 1, "files": 2, "exit_code": 0}
    (finding,) = data["findings"]
    assert {k: finding[k] for k in ("path", "line", "col", "code", "severity")} == {
        "path": "voxtrallike/pipeline.yaml", "line": 13, "col": 5, "code": "OL100", "severity": "info"
    }


def test_sarif_format(cli):
    code, out, _ = cli("--format", "sarif", ".", cwd=FIXTURES / "branches")
    assert code == 1
    sarif = json.loads(out)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    rule_ids = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert "OL001" in rule_ids and "OL002" in rule_ids
    results = run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [("OL001", "error"), ("OL002", "error")]
    location = results[1]["locations"][0]["physicalLocation"]
    assert location == {"artifactLocation": {"uri": "fanout/registry.py"}, "region": {"startLine": 15, "startColumn": 1}}
    assert rule_ids[results[1]["ruleIndex"]] == "OL002"


def test_github_format_escapes_and_maps_severity(cli):
    code, out, _ = cli("--format", "github", ".", cwd=FIXTURES / "payload_only")
    assert code == 0
    assert out.startswith("::notice file=voxtrallike/pipeline.yaml,line=13,col=5,title=OL100 declared-edge-without-state::OL100 ")
    code, out, _ = cli("--format", "github", ".", cwd=FIXTURES / "branches")
    first = out.splitlines()[0]
    assert first.startswith("::error file=fanout/registry.py,line=4,col=5,title=OL001 undeclared-handoff::OL001 SpeakerRegistry._speakers")


def test_explain(cli, tmp_path):
    code, out, _ = cli("--explain", "OL001", cwd=tmp_path)
    assert code == 0
    assert out.startswith("OL001 undeclared-handoff (error)")
    assert "Reported:" in out and "Accepted:" in out and "process_local_edges" in out
    code, out, err = cli("--explain", "OL01", cwd=tmp_path)
    assert code == 2
    assert "unknown rule code 'OL01'" in err and "did you mean" in err


def test_missing_path_and_no_model_folder_are_tool_failures(cli, tmp_path):
    code, _, err = cli("does/not/exist", cwd=tmp_path)
    assert code == 2
    assert "does/not/exist: no such file or directory" in err
    (tmp_path / "empty").mkdir()
    code, _, err = cli("empty", cwd=tmp_path)
    assert code == 2
    assert "no model folders found under empty" in err


def test_select_and_ignore_flags(cli):
    code, out, _ = cli("--select", "OL002", ".", cwd=FIXTURES / "branches")
    assert code == 1 and [line.split()[1] for line in out.splitlines()] == ["OL002"]
    code, out, _ = cli("--ignore", "OL00", ".", cwd=FIXTURES / "branches")
    assert (code, out) == (0, "")
    code, _, err = cli("--select", "OL0X", ".", cwd=FIXTURES / "branches")
    assert code == 2 and "unknown rule code 'OL0X'" in err


def test_pyproject_settings(cli, tmp_path):
    root = _copy("context_pair", tmp_path)
    (root / "pyproject.toml").write_text('[tool.omni-lint]\nexclude = ["qwenlike_undeclared"]\n')
    code, out, err = cli(cwd=root)  # no PATH: [tool.omni-lint] paths, else "."
    assert (code, out) == (0, "")
    assert "1 model folder" in err

    (root / "pyproject.toml").write_text('[tool.omni-lint]\npaths = ["qwenlike_undeclared"]\nignore = ["OL001"]\n')
    sub = root / "qwenlike"
    code, out, _ = cli(cwd=sub)  # the closest pyproject.toml with the table is found above the cwd
    assert (code, out) == (0, "")

    (root / "pyproject.toml").write_text('[tool.omni-lint]\nselect = ["OL001"]\npath = ["x"]\n')
    code, _, err = cli(".", cwd=root)
    assert code == 2
    assert "unknown key 'path'" in err and "did you mean 'paths'?" in err and "pyproject.toml" in err

    (root / "pyproject.toml").write_text('[tool.omni-lint]\nignore = ["OL777"]\n')
    code, _, err = cli(".", cwd=root)
    assert code == 2 and "unknown rule code 'OL777'" in err


def test_console_script_in_a_real_process(tmp_path):
    """The installed entry point: a broken pipeline file is a finding (exit 1), not a traceback."""
    root = _copy("broken", tmp_path)
    result = subprocess.run([sys.executable, "-m", "omni_lint", "badconfig"], cwd=root, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stdout.startswith("badconfig/pipeline.yaml:5:5: OL901 pipeline file does not load: stages.preprocessing.nxt")
    assert "Traceback" not in result.stderr
    script = shutil.which("omni-lint", path=str(__import__("pathlib").Path(sys.executable).parent))
    assert script is not None, "the omni-lint console script is not installed next to the interpreter"
    result = subprocess.run([script, "--explain", "OL900"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("OL900 parse-error (error)")


def test_explicit_config_file(cli, tmp_path):
    root = _copy("context_pair", tmp_path)
    config = tmp_path / "lint.toml"
    config.write_text('[tool.omni-lint]\nselect = ["OL100"]\n')
    code, out, _ = cli("--config", str(config), ".", cwd=root)
    assert (code, out) == (0, "")
    code, _, err = cli("--config", str(tmp_path / "missing.toml"), ".", cwd=root)
    assert code == 2 and "missing.toml: no such file" in err
    config.write_text("[tool.omni-lint\n")
    code, _, err = cli("--config", str(config), ".", cwd=root)
    assert code == 2 and "invalid TOML" in err


def test_cache_flags(cli, tmp_path):

    stages = "def build_a():\n    return None\n\n\ndef build_b():\n    return None\n"
    write_tree(tmp_path, {"m/__init__.py": "", "m/stages.py": stages, "m/pipeline.yaml": pipeline_yaml("m", chain("m", ["a", "b"]))})
    code, _out, err = cli("--cache-dir", "c", ".", cwd=tmp_path)
    assert code == 0 and "from the cache" not in err and (tmp_path / "c" / "CACHEDIR.TAG").is_file()
    code, _out, err = cli("--cache-dir", "c", ".", cwd=tmp_path)
    assert code == 0 and "1 from the cache" in err
    code, _out, err = cli("--no-cache", ".", cwd=tmp_path)
    assert code == 0 and "from the cache" not in err and not (tmp_path / ".omni_lint_cache").exists()
    code, _out, err = cli(".", cwd=tmp_path)  # default: .omni_lint_cache in the project root
    assert code == 0 and (tmp_path / ".omni_lint_cache").is_dir()
    with pytest.raises(SystemExit) as exit_info:
        cli("--jobs", "0", ".", cwd=tmp_path)
    assert exit_info.value.code == 2


def test_version_is_the_installed_one():
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "omni_lint", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.split()[-1] == version("omni-lint"), done
