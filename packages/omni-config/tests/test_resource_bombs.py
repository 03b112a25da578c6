"""Configs built to exhaust memory: bounded in bytes after alias expansion, and errors that never echo a huge value."""

from __future__ import annotations

import pytest

from omni_config import ConfigError, ConfigFileError, load_config
from omni_config.errors import MAX_SHOWN_CHARS
from omni_config.yamlread import MAX_EXPANDED_BYTES, read_document

BLOB = "x" * 65536


def _aliased(count: int) -> str:
    """One 64 KiB string anchored once and aliased ``count`` times in a list (the issue's 462 KB file at 99,000)."""
    return f'blob: [&a "{BLOB}", ' + ", ".join(["*a"] * count) + "]\n"


def test_one_large_string_aliased_many_times_is_refused_by_its_expanded_bytes():
    text = _aliased(99_000)
    assert len(text) < 500_000  # few values, a small file: only the bytes give it away
    with pytest.raises(ConfigFileError, match=f"expands to more than {MAX_EXPANDED_BYTES} bytes") as caught:
        read_document(text, "bomb.yaml")
    assert "line 1" in caught.value.reason and "alias" in caught.value.fix
    assert len(str(caught.value)) < 1000


def test_aliases_that_stay_under_the_byte_bound_still_read():
    doc = read_document(_aliased(MAX_EXPANDED_BYTES // len(BLOB) - 2), "ok.yaml")
    assert doc.data["blob"][-1] == BLOB


def test_an_error_about_a_huge_value_shows_a_cut_value_with_its_size(write):
    huge = "y" * 3_000_000
    items = ", ".join(str(i) for i in range(5000))
    path = write("p.yaml", f"""\
        name: n
        unknown_top_level_key: "{huge}"
        another_unknown_key: [{items}]
        stages:
          - {{name: a, factory: m.s:a, terminal: true}}
        """)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = caught.value.render()
    assert len(text) < 4000, text[:400]
    assert f"(cut of {len(huge)} characters)" in text
    assert "more items" in text
    for issue in caught.value.to_dict()["errors"]:
        assert len(str(issue.get("value", ""))) < 2 * MAX_SHOWN_CHARS + 200
