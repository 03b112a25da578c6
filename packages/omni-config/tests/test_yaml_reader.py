"""The YAML reader: plain JSON values, every node its own object, bounded, and every mistake with its line."""

from __future__ import annotations

import os
import time

import pytest

from omni_config import ConfigError, ConfigFileError, load_config, raw_config
from omni_config.names import endpoint_name_problem, env_name_problem, env_value_problem
from omni_config.yamlread import MAX_DEPTH, read_document, read_value


def issues_of(text: str) -> list:
    return list(read_document(text, "f.yaml").issues)


def test_values_and_their_positions():
    doc = read_document("a:\n  b: [1, x]\n  c: {d: 2.5}\n", "f.yaml")
    assert doc.data == {"a": {"b": [1, "x"], "c": {"d": 2.5}}}
    assert doc.issues == ()
    assert doc.marks[("a", "b", 1)] == (2, 10)
    assert doc.marks[("a", "c", "d")] == (3, 10)


def test_duplicate_keys_name_both_lines_and_keep_neither_silently():
    (issue,) = issues_of("stages: []\nname: a\nname: b\n")
    assert issue.path == "name" and (issue.line, issue.column) == (3, 1)
    assert "line 2 and line 3" in issue.rule
    assert issue.fix == "remove one of the two 'name' entries"


def test_each_alias_is_a_copy():
    doc = read_document("base: &r {resources: {total_gpu_memory_fraction: 0.1}}\na: *r\nb: *r\n", "f.yaml")
    assert doc.data["a"] == doc.data["b"] == doc.data["base"]
    assert doc.data["a"] is not doc.data["b"]
    assert doc.data["a"]["resources"] is not doc.data["b"]["resources"]


def test_merge_keys_take_the_mapping_s_own_keys_first():
    doc = read_document("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n", "f.yaml")
    assert doc.data["m"] == {"y": 3, "x": 1}


@pytest.mark.parametrize(("text", "words"), [
    ("when: 2024-01-01\n", "as a date"),
    ("when: 2001-12-14t21:59:43.10-05:00\n", "as a date"),
    ("blob: !!binary aGVsbG8=\n", "tag:yaml.org,2002:binary"),
    ("x: !Ref thing\n", "!Ref"),
    ("s: !!set {a, b}\n", "tag:yaml.org,2002:set"),
    ("f: .inf\n", "not a JSON number"),
    ("f: .nan\n", "not a JSON number"),
    ("i: " + "9" * 5000 + "\n", "not a valid int"),
    ("1: x\n", "key must be a string"),
    ("on: x\n", "bool True"),
    ("? [a]\n: x\n", "key must be a string"),
], ids=["date", "timestamp", "binary", "custom-tag", "set", "inf", "nan", "huge-int", "int-key", "bool-key", "list-key"])
def test_non_json_values_are_mistakes_with_their_line(text, words):
    (issue,) = issues_of(text)
    assert words in issue.rule
    assert issue.line == 1 and issue.source == "f.yaml"


@pytest.mark.parametrize(("text", "words"), [
    ("x: !!python/object/apply:os.system ['true']\n", "run code"),
    ("x: !!python/name:os.system\n", "run code"),
    ("x: *nowhere\n", "refers to no complete anchor"),
    ("x: &a [1, *a]\n", "refers to no complete anchor"),
    ("a: 1\n---\nb: 2\n", "second YAML document"),
    ("x: [\n", "YAML syntax error"),
], ids=["python-object", "python-name", "unknown-alias", "recursive-alias", "two-documents", "syntax"])
def test_unsafe_or_unreadable_documents_are_file_errors(text, words):
    with pytest.raises(ConfigFileError, match=words) as caught:
        read_document(text, "f.yaml")
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 5000])
def test_nesting_is_bounded_without_recursion(levels):
    deep = "x: " + "[" * levels + "]" * levels + "\n"
    with pytest.raises(ConfigFileError, match="nesting") as caught:
        read_document(deep, "f.yaml")
    assert caught.value.line == 1
    block = "".join(f"{'  ' * i}k{i}:\n" for i in range(MAX_DEPTH + 2)) + "  " * (MAX_DEPTH + 2) + "leaf: 1\n"
    with pytest.raises(ConfigFileError, match=f"nesting deeper than {MAX_DEPTH}"):
        read_document(block, "f.yaml")
    read_document("x: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n", "f.yaml")


def test_an_alias_bomb_fails_at_once():
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    start = time.perf_counter()
    with pytest.raises(ConfigFileError, match="aliases copy more than"):
        read_document("\n".join(lines) + "\n", "bomb.yaml")
    assert time.perf_counter() - start < 2  # the issue's bar: a hang is what this guards against


def test_an_aliased_mapping_is_overridden_for_the_named_stage_only(write):
    path = write("p.yaml", """\
        shared: &gpu {resources: {total_gpu_memory_fraction: 0.25}}
        stages:
          - {name: a, factory: m.s:a, next: b, gpu: 0, process: pa, runtime: *gpu}
          - {name: b, factory: m.s:b, terminal: true, gpu: 0, process: pb, runtime: *gpu}
        """.replace("shared: &gpu", "x-shared: &gpu"))
    with pytest.raises(ConfigError, match="x-shared"):  # an unknown top-level key is still an error
        load_config(path)
    path.write_text(path.read_text().replace("x-shared: &gpu {resources: {total_gpu_memory_fraction: 0.25}}\n", "")
                    .replace("runtime: *gpu}", "runtime: &gpu {resources: {total_gpu_memory_fraction: 0.25}}}", 1))
    config = load_config(path, ["--stages.a.runtime.resources.total_gpu_memory_fraction", "0.5"])
    assert config.stage("a").memory_fraction == 0.5
    assert config.stage("b").memory_fraction == 0.25


def test_raw_config_does_not_share_mappings_between_stages(higgs):
    shared = {"resources": {"total_gpu_memory_fraction": 0.05}}
    higgs["stages"][1]["runtime"] = shared
    higgs["stages"][3]["runtime"] = shared
    config = raw_config(higgs, ["--stages.vocoder.runtime.resources.total_gpu_memory_fraction", "0.1"])
    assert config.stage("vocoder").memory_fraction == 0.1
    assert config.stage("audio_encoder").memory_fraction == 0.05


def test_raw_config_refuses_data_that_refers_to_itself(higgs):
    loop: dict = {}
    loop["again"] = loop
    higgs["stages"][0]["factory_args"] = {"x": loop}
    with pytest.raises(ConfigError, match="refers to itself"):
        raw_config(higgs)


@pytest.mark.parametrize("text", ["2024-01-01", "!!binary aGk=", "[" * 100 + "]" * 100, "&a [*a]"])
def test_override_values_follow_the_file_rules(text):
    with pytest.raises(ValueError):  # noqa: PT011 - the rule text varies by case
        read_value(text)


@pytest.mark.parametrize(("name", "value"), [
    ("OK_NAME", "v"), ("", "v"), ("A=B", "v"), ("A\0", "v"), ("A", "v\0"), ("\udcff", "v"), ("A", "\udcff"), ("lower-case.dots", "any text = ok"),
])
def test_env_predicates_agree_with_the_os(name, value):
    """The runtime sets env through os.environ: the predicates must refuse exactly what putenv refuses."""
    predicted_ok = env_name_problem(name) is None and env_value_problem(value) is None
    saved = os.environ.get(name) if predicted_ok else None
    try:
        os.putenv(name, value)
    except (ValueError, UnicodeEncodeError, OSError):
        os_ok = False
    else:
        os_ok = True
        if saved is None:
            os.unsetenv(name)
        else:
            os.putenv(name, saved)
    assert predicted_ok == os_ok


@pytest.mark.parametrize(("name", "ok"), [("vocoder", True), ("vocoder@r1", True), ("a" * 64, True), ("a" * 65, False), ("voc\n", False), ("a b", False), ("", False)])
def test_endpoint_names(name, ok):
    assert (endpoint_name_problem(name) is None) == ok
