"""The analysis cache: reused while every input is unchanged, redone where the analysis looked."""

from __future__ import annotations

import json

from conftest import chain, pipeline_yaml, write_tree

from omni_lint import Settings, lint

HELPER = "from collections import deque\nQUEUE = deque()\n"
STAGES = """
from common.helper import QUEUE


def build_preprocessing():
    return lambda p: QUEUE.append(p)


def build_tts_engine():
    return lambda p: QUEUE.popleft()
"""


def _tree(root):
    files = {"common/__init__.py": "", "common/helper.py": HELPER}
    for name in ("a", "b"):
        files[f"{name}/__init__.py"] = ""
        files[f"{name}/stages.py"] = STAGES
        files[f"{name}/pipeline.yaml"] = pipeline_yaml(name, chain(name, ["preprocessing", "tts_engine"]))
    return write_tree(root, files)


def _run(root, cache):
    return lint([root], Settings(base=root), cwd=root, cache_dir=cache, jobs=1)


def test_second_run_comes_from_the_cache_with_the_same_findings(tmp_path):
    root, cache = _tree(tmp_path / "tree"), tmp_path / "cache"
    first = _run(root, cache)
    assert first.cached == 0 and [f.code for f in first.findings] == ["OL001", "OL001"]
    second = _run(root, cache)
    assert second.cached == 2 and second.findings == first.findings
    entry = json.loads(next(p for p in cache.glob("*.json") if p.name != "files.json").read_text())  # JSON, never pickle
    assert entry["key"]["format"] == 1 and "findings" in entry["result"]
    per_file = json.loads((cache / "files.json").read_text())["files"]  # per-file records by content digest
    assert set(entry["result"]["files"].values()) <= set(per_file)
    assert (cache / "CACHEDIR.TAG").is_file() and (cache / ".gitignore").read_text().endswith("*\n")


def test_an_edit_to_a_shared_helper_reanalyses_every_folder_that_read_it(tmp_path):
    root, cache = _tree(tmp_path / "tree"), tmp_path / "cache"
    _run(root, cache)
    (root / "common" / "helper.py").write_text("QUEUE = ()\n")  # no longer state
    report = _run(root, cache)
    assert report.cached == 0 and report.findings == ()


def test_a_new_module_that_changes_an_import_reanalyses(tmp_path):
    root, cache = _tree(tmp_path / "tree"), tmp_path / "cache"
    _run(root, cache)
    # common/helper/ as a package would now win over common/helper.py: the probe saw nothing there
    (root / "common" / "helper").mkdir()
    (root / "common" / "helper" / "__init__.py").write_text("QUEUE = ()\n")
    report = _run(root, cache)
    assert report.cached == 0


def test_a_new_python_file_in_a_folder_reanalyses_that_folder_only(tmp_path):
    root, cache = _tree(tmp_path / "tree"), tmp_path / "cache"
    _run(root, cache)
    (root / "a" / "broken.py").write_text("def (:\n")
    report = _run(root, cache)
    assert report.cached == 1
    assert [(f.path, f.code) for f in report.findings if f.code == "OL900"] == [("a/broken.py", "OL900")]


def test_a_corrupt_entry_is_ignored_and_rewritten(tmp_path):
    root, cache = _tree(tmp_path / "tree"), tmp_path / "cache"
    _run(root, cache)
    for entry in cache.glob("*.json"):
        entry.write_text("{not json")  # folder entries and the per-file store
    assert _run(root, cache).cached == 0
    assert _run(root, cache).cached == 2


def test_parallel_workers_give_the_same_report(tmp_path):
    root = _tree(tmp_path / "tree")
    serial = lint([root], Settings(base=root), cwd=root, jobs=1)
    from omni_lint import engine

    limit = engine.PARALLEL_MIN_FILES
    engine.PARALLEL_MIN_FILES = 0
    try:
        parallel = lint([root], Settings(base=root), cwd=root, jobs=2)
    finally:
        engine.PARALLEL_MIN_FILES = limit
    assert parallel.findings == serial.findings and parallel.files == serial.files
