"""Hostile pipeline files and overrides through `omni-compile`: a clean error with its line, never a
traceback or a hang; and `--format github` annotations CI can put on the line.

The table of cases is the fuzzing report's list; the property test mutates the fixture file and the
override strings at random and holds every outcome to: exit 0, 1 or 2, no traceback, under 2 s, and an
accepted config serialises as JSON and passes the runtime's own name and environment checks.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from compiler_helpers import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omni_compiler import compile_file
from omni_compiler.cli import main
from omni_config.names import endpoint_name_problem, env_name_problem, env_value_problem

HIGGS_TEXT = (FIXTURES / "higgs_tts.yaml").read_text()
BOMB = "\n".join(['x-a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
                 + [f"x-a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]) + "\n"


@pytest.fixture(scope="module", autouse=True)
def _models_built() -> None:
    """The first validation in a process builds the pydantic models, once; the 2 s bar is per input."""
    assert main(["validate", str(FIXTURES / "higgs_tts.yaml")]) == 0


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def higgs_with(old: str, new: str) -> str:
    assert old in HIGGS_TEXT, old
    return HIGGS_TEXT.replace(old, new, 1)


CASES = {
    # name: (file text, overrides, exit code, path in the error, words of the rule)
    "deep-nesting": (higgs_with("dtype: bfloat16", "dtype: " + "[" * 3000 + "]" * 3000), [], 2, None, "nesting"),
    "date": (higgs_with("dtype: bfloat16", "dtype: 2024-01-01"), [], 1, "stages.tts_engine.factory_args.dtype", "as a date"),
    "timestamp": (higgs_with("dtype: bfloat16", "dtype: 2001-12-14 21:59:43.10 -5"), [], 1, "stages.tts_engine.factory_args.dtype", "as a date"),
    "binary": (higgs_with("dtype: bfloat16", "dtype: !!binary aGVsbG8="), [], 1, "stages.tts_engine.factory_args.dtype", "binary"),
    "alias-bomb": (BOMB + HIGGS_TEXT, [], 2, None, "aliases copy more than"),
    "duplicate-key": (higgs_with("    process: vocoder\n", "    process: vocoder\n    process: pipeline\n"), [], 1, "stages.vocoder.process", "line 33 and line 34"),
    "env-empty-name": (higgs_with('OMNI_VOCODER_CHUNK: "2048"', '"": "2048"'), [], 1, "stages.vocoder.env['']", "non-empty"),
    "env-equals": (higgs_with('OMNI_VOCODER_CHUNK: "2048"', '"A=B": "2048"'), [], 1, "stages.vocoder.env.A=B", "'='"),
    "env-nul": (higgs_with('OMNI_VOCODER_CHUNK: "2048"', 'OMNI_VOCODER_CHUNK: "20\\x0048"'), [], 1, "stages.vocoder.env.OMNI_VOCODER_CHUNK", "NUL"),
    "name-newline": (higgs_with("  - name: vocoder\n", '  - name: "vocoder\\n"\n'), [], 1, "stages[3].name", "only letters"),
    "factory-newline": (higgs_with("build_vocoder", 'build_vocoder\\n"').replace("factory: omni_models.higgs_tts.stages:build_vocoder", 'factory: "omni_models.higgs_tts.stages:build_vocoder'), [], 1, "stages.vocoder.factory", "import path"),
    "factory-shape": (higgs_with("omni_models.higgs_tts.stages:build_vocoder", "build_vocoder"), [], 1, "stages.vocoder.factory", "import path"),
    "process-65-chars": (higgs_with("process: vocoder", "process: " + "v" * 65), [], 1, "stages.vocoder.process", "limit is 64"),
    "replica-suffix-over-64": (HIGGS_TEXT, ["--stages.vocoder.process", "v" * 62, "--processes." + "v" * 62 + ".num_replicas", "2",
                                            "--processes." + "v" * 62 + ".replica_devices", "0,0"], 1, "stages.vocoder.process", "limit is 64"),
    "python-tag": (higgs_with("dtype: bfloat16", "dtype: !!python/object/apply:os.system ['true']"), [], 2, None, "run code"),
    "custom-tag": (higgs_with("dtype: bfloat16", "dtype: !Ref x"), [], 1, "stages.tts_engine.factory_args.dtype", "!Ref"),
    "infinity": (higgs_with("dtype: bfloat16", "dtype: .inf"), [], 1, "stages.tts_engine.factory_args.dtype", "JSON number"),
    "non-string-key": (higgs_with("dtype: bfloat16", "dtype: {1: x}"), [], 1, "stages.tts_engine.factory_args.dtype", "key must be a string"),
    "two-documents": (HIGGS_TEXT + "---\nstages: []\n", [], 2, None, "second YAML document"),
    "huge-tp": (higgs_with("    process: vocoder\n", "    process: vocoder\n    tp_size: 100000\n"), [], 1, "stages.vocoder.tp_size", "less than or equal to 1024"),
    "override-date": (HIGGS_TEXT, ["--stages.tts_engine.factory_args.dtype", "2024-01-01"], 1, "stages.tts_engine.factory_args.dtype", "as a date"),
    "override-deep": (HIGGS_TEXT, ["--stages.tts_engine.factory_args.dtype", "[" * 200 + "]" * 200], 1, "stages.tts_engine.factory_args.dtype", "nesting"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_hostile_input_is_a_clean_error_with_its_line(case, tmp_path):
    text, overrides, expected, path, words = CASES[case]
    config = tmp_path / "pipeline.yaml"
    config.write_text(text)
    code, out, err = run(["validate", str(config), *overrides, "--format", "json"])
    assert code == expected, (out, err)
    assert "Traceback" not in out + err and "internal error" not in err
    (error, *_) = json.loads(out)["errors"]
    assert words in error["rule"], error
    if expected == 1:
        assert any(e["path"] == path for e in json.loads(out)["errors"]), json.loads(out)["errors"]
        assert error.get("line") or error.get("source") == "command line", error
    else:
        assert error["line"] >= 1, error


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    code, _, err = run(["validate", str(fifo)])
    assert code == 2
    assert "not a regular file" in err


def test_an_override_of_an_aliased_mapping_changes_only_the_stage_it_names(tmp_path):
    text = higgs_with("    runtime:\n      resources:\n        total_gpu_memory_fraction: 0.03\n",
                      "    runtime: &small\n      resources:\n        total_gpu_memory_fraction: 0.03\n")
    text = text.replace("    runtime:\n      resources:\n        total_gpu_memory_fraction: 0.10\n", "    runtime: *small\n")
    path = tmp_path / "p.yaml"
    path.write_text(text)
    topology = compile_file(path, ["--stages.audio_encoder.runtime.resources.total_gpu_memory_fraction", "0.05"])
    assert topology.stage("audio_encoder").memory_fraction == 0.05
    assert topology.stage("vocoder").memory_fraction == 0.03


def test_github_annotations_point_at_the_line(tmp_path):
    deploy = tmp_path / "deploy.yaml"
    (tmp_path / "higgs.yaml").write_text(HIGGS_TEXT)
    deploy.write_text("extends: higgs.yaml\nstages:\n  - name: vocoder\n    procss: x\n  - name: tts_engine\n    tp_size: 0\n")
    code, out, err = run(["validate", str(deploy), "--format", "github", "--stages.vocoder.gpu", "x"])
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 3, out
    assert all(line.startswith("::error ") for line in lines)
    assert any(re.match(rf"::error file={re.escape(str(deploy))},line=4,col=13,title=omni-compile%3A stages\.vocoder\.procss::", line) for line in lines), out
    assert any(re.match(rf"::error file={re.escape(str(deploy))},line=6,col=14,title=omni-compile%3A stages\.tts_engine\.tp_size::", line) for line in lines), out
    assert any(line.startswith("::error title=omni-compile%3A command line --stages.vocoder.gpu::") for line in lines), out
    assert "%0Afix: " in out
    assert "3 errors in the configuration" in err  # the human form stays in the log


def test_github_annotation_for_a_file_error(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("stages:\n  - name: [\n")
    code, out, _ = run(["validate", str(path), "--format", "github"])
    assert code == 2
    assert re.match(rf"::error file={re.escape(str(path))},line=3,col=1,title=omni-compile%3A cannot load the file::YAML syntax error", out), out


def test_github_format_prints_the_table_when_valid():
    code, out, _ = run(["validate", str(FIXTURES / "higgs_tts.yaml"), "--format", "github"])
    assert code == 0
    assert out.startswith("tts_frontend : preprocessing, audio_encoder\n")


# --- property: mutated files and override strings ------------------------------------------------

HOSTILE_SCALARS = [
    "2024-01-01", "2001-12-14t21:59:43.10-05:00", "!!binary aGVsbG8=", "!!python/name:os.system", "!custom x", ".inf", ".nan",
    '"a\\n"', '"\\0"', '"\\udcff"', "v" * 70, "0x1F", "~", "[" * 80 + "]" * 80, "*nowhere", "&a [1, *a]", "{a: 1, a: 2}",
    "9" * 5000, "yes", "-1", "[]", "{}", "'", "1.0e+400", '""', '"="', '"x=y"', "a.b", "m:f", "{1: x}", "[0, 1]", "1,2", "0.5",
]
VALUE_LINE = re.compile(r"^(\s*(?:- )?[A-Za-z_]+: )(\S.*)$")


@st.composite
def mutated_files(draw) -> str:
    lines = HIGGS_TEXT.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["value", "value", "duplicate", "delete", "env", "anchor", "bomb"]))
        index = draw(st.integers(0, len(lines) - 1))
        if op == "value":
            slots = [i for i, line in enumerate(lines) if VALUE_LINE.match(line)]
            index = draw(st.sampled_from(slots))
            lines[index] = VALUE_LINE.sub(lambda m: m.group(1) + draw(st.sampled_from(HOSTILE_SCALARS)), lines[index])
        elif op == "duplicate":
            lines.insert(index, lines[index])
        elif op == "delete" and len(lines) > 1:
            del lines[index]
        elif op == "env":
            key, value = draw(st.sampled_from([*HOSTILE_SCALARS, "OK"])), draw(st.sampled_from([*HOSTILE_SCALARS, "v"]))
            lines.insert(lines.index("    process: vocoder") if "    process: vocoder" in lines else index, f"    env: {{{key}: {value}}}")
        elif op == "anchor" and "        total_gpu_memory_fraction: 0.03" in lines:
            at = lines.index("        total_gpu_memory_fraction: 0.03")
            lines[at - 2] = "    runtime: &shared"
            lines = [("    runtime: *shared" if line == "    runtime:" and i > at else line) for i, line in enumerate(lines)]
        elif op == "bomb":
            lines = BOMB.splitlines()[: draw(st.integers(2, 10))] + lines
    return "\n".join(lines) + "\n"


FLAGS = ["--stages.vocoder.process", "--stages.tts_engine.tp_size", "--stages.tts_engine.gpu", "--processes.vocoder.num_replicas",
         "--processes.vocoder.replica_devices", "--stages.audio_encoder.runtime.resources.total_gpu_memory_fraction",
         "--stages.tts_engine.factory_args.dtype", "--placement.num_gpus", "--processes." + "p" * 70 + ".num_replicas"]
OVERRIDES = st.lists(st.tuples(st.sampled_from(FLAGS), st.sampled_from([*HOSTILE_SCALARS, "vocoder", "pipeline", "2", "0,1", "v" * 63])), max_size=3)


@settings(max_examples=80, deadline=timedelta(seconds=2), suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutated_files(), OVERRIDES, st.sampled_from(["text", "json", "github"]))
def test_mutated_files_and_overrides_end_cleanly(text, overrides, fmt):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pipeline.yaml"
        path.write_text(text)
        argv = [token for flag, value in overrides for token in (flag, value)]
        code, out, err = run(["show", str(path), "--format", fmt, *argv])
        assert code in (0, 1, 2), (code, err)
        assert "Traceback" not in out + err and "internal error" not in err, err
        if code == 0:
            _accepted_config_is_runnable(path, argv)


def _accepted_config_is_runnable(path: Path, argv: list[str]) -> None:
    """What `omni serve` would do next: serialise the topology, name every endpoint, set every env."""
    topology = compile_file(path, argv)
    text = topology.to_json()
    json.loads(text, parse_constant=lambda token: pytest.fail(f"non-JSON constant {token} in the topology"))
    for instance in topology.instances:
        assert endpoint_name_problem(instance.name) is None, instance.name
    for stage in topology.stages:
        for name, value in stage.env.items():
            assert env_name_problem(name) is None and env_value_problem(value) is None, (name, value)
        for fraction in [stage.memory_fraction] if stage.memory_fraction is not None else []:
            assert math.isfinite(fraction)
