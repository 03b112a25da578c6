"""Hostile files end in a finding (OL900) or a clean exit: never a silent skip, a traceback, a hang
or a crash. Each case runs the real CLI in its own process (a crash or hang cannot hide)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import HANDOFF, chain, pipeline_yaml, write_tree


def _model(root, name="m", stages_text=HANDOFF):
    write_tree(root, {f"{name}/__init__.py": "", f"{name}/stages.py": stages_text, f"{name}/pipeline.yaml": pipeline_yaml(name, chain(name, ["preprocessing", "tts_engine"]))})
    return root / name


def _cli(root, timeout=60):
    done = subprocess.run(
        [sys.executable, "-m", "omni_lint", "--no-cache", "--jobs", "1", "."], cwd=root, capture_output=True, text=True, timeout=timeout
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 1), (done.returncode, done.stdout, done.stderr)
    return done.returncode, done.stdout.splitlines()


def test_symlink_loop_in_a_model_folder_is_reported_and_the_neighbours_still_linted(tmp_path):
    _model(tmp_path, "a")
    os.symlink("loop", tmp_path / "a" / "loop")
    _model(tmp_path, "b")
    code, lines = _cli(tmp_path)
    assert code == 1
    assert any(line.startswith("a/loop:1:1: OL900") and "symlink loop" in line for line in lines)
    assert any(line.startswith("a/stages.py:") and " OL001 " in line for line in lines)
    assert any(line.startswith("b/stages.py:") and " OL001 " in line for line in lines)


def test_symlink_loop_in_a_subpackage(tmp_path):
    model = _model(tmp_path)
    (model / "sub").mkdir()
    (model / "sub" / "__init__.py").write_text("")
    os.symlink("two.py", model / "sub" / "one.py")
    os.symlink("one.py", model / "sub" / "two.py")
    code, lines = _cli(tmp_path)
    assert code == 1
    assert any(line.startswith("m/sub/one.py:1:1: OL900") and "symlink loop" in line for line in lines)
    assert any(" OL001 " in line for line in lines)


def test_folder_link_to_its_own_folder_is_reported_and_the_real_files_still_linted(tmp_path):
    model = _model(tmp_path)
    os.symlink(".", model / "selfloop")
    code, lines = _cli(tmp_path)
    assert code == 1
    assert any(line.startswith("m/selfloop:1:1: OL900") and "symlink loop" in line for line in lines), lines
    assert any(line.startswith("m/stages.py:") and " OL001 " in line for line in lines)
    assert not any("selfloop/" in line for line in lines)


def test_folder_link_to_the_parent_from_a_subpackage_is_reported(tmp_path):
    model = _model(tmp_path)
    (model / "sub").mkdir()
    (model / "sub" / "__init__.py").write_text("")
    os.symlink("..", model / "sub" / "up")
    code, lines = _cli(tmp_path)
    assert code == 1
    assert any(line.startswith("m/sub/up:1:1: OL900") and "symlink loop" in line for line in lines), lines
    assert any(line.startswith("m/stages.py:") and " OL001 " in line for line in lines)
    assert not any("up/" in line for line in lines)


def test_folder_link_to_a_sibling_is_not_a_loop(tmp_path):
    model = _model(tmp_path)
    (model / "data").mkdir()
    os.symlink("data", model / "alias")
    code, lines = _cli(tmp_path)
    assert code == 1 and any(line.startswith("m/stages.py:") and " OL001 " in line for line in lines)
    assert not any(" OL900 " in line for line in lines), lines


@pytest.mark.parametrize("expression", ["+".join(["1"] * 1000), "a" + ".b" * 1000])
def test_long_sum_and_attribute_chain_are_valid_python_and_analysed(tmp_path, expression):
    _model(tmp_path, stages_text=HANDOFF + f"\n\ndef helper(a=None):\n    return {expression}\n")
    code, lines = _cli(tmp_path, timeout=120)
    assert code == 1 and [line.split(" ")[1] for line in lines] == ["OL001"]


def test_deeply_nested_brackets_are_refused_before_the_parser(tmp_path):
    _model(tmp_path, stages_text=HANDOFF + "\nX = " + "(" * 2000 + "1" + ")" * 2000 + "\n")
    code, lines = _cli(tmp_path)
    assert code == 1
    (line,) = [line for line in lines if " OL900 " in line]
    assert line.startswith("m/stages.py:") and "nest deeper than 200" in line


def test_operator_chain_that_would_take_minutes_is_refused(tmp_path):
    _model(tmp_path, stages_text=HANDOFF + "\nX = " + "+".join(["1"] * 10000) + "\n")
    code, lines = _cli(tmp_path)
    assert code == 1 and any(" OL900 " in line and "split the expression" in line for line in lines)


def test_fifo_is_not_read(tmp_path):
    model = _model(tmp_path)
    os.mkfifo(model / "pipe.py")
    code, lines = _cli(tmp_path, timeout=30)
    assert code == 1
    assert any(line.startswith("m/pipe.py:1:1: OL900") and "a FIFO" in line for line in lines)


def test_symlink_to_dev_zero_is_not_read(tmp_path):
    model = _model(tmp_path)
    os.symlink("/dev/zero", model / "zero.py")
    code, lines = _cli(tmp_path, timeout=30)
    assert code == 1
    assert any(line.startswith("m/zero.py:1:1: OL900") and "character device" in line for line in lines)


def test_oversized_file_is_refused(tmp_path):
    model = _model(tmp_path)
    (model / "big.py").write_text("# padding\n" * 300_000)
    code, lines = _cli(tmp_path)
    assert code == 1
    assert any(line.startswith("m/big.py:1:1: OL900") and "limit" in line for line in lines)


def test_pep263_latin1_cookie_is_honoured(tmp_path):
    model = _model(tmp_path, stages_text="")
    text = "# -*- coding: latin-1 -*-\nGREETING = 'caf\u00e9'\n" + HANDOFF
    (model / "stages.py").write_bytes(text.encode("latin-1"))
    code, lines = _cli(tmp_path)
    # the module is read (the handoff in it is found), not refused as "not UTF-8"
    assert code == 1 and [line.split(" ")[1] for line in lines] == ["OL001"]


def test_pipeline_file_that_is_not_a_regular_file_is_reported(tmp_path):
    model = _model(tmp_path)
    os.symlink("/dev/zero", model / "pipeline_zero.yaml")
    code, lines = _cli(tmp_path, timeout=30)
    assert code == 1
    assert any(line.startswith("m/pipeline_zero.yaml:1:1: OL900") and "character device" in line for line in lines)
    assert any(" OL001 " in line for line in lines)  # the real pipeline file is still checked
