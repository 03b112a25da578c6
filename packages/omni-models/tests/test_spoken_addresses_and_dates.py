"""Phone numbers, numeric dates and web addresses are read as a person reads them, and
``omni synthesize --print-normalized`` shows the spoken text without synthesizing."""

from __future__ import annotations

import pytest
from e2e_support import omni

from omni_models.common.spoken import spoken_form


@pytest.mark.parametrize(("written", "spoken"), [
    ("Call 555-123-4567.", "Call five five five, one two three, four five six seven."),
    ("Call (555) 123-4567 now", "Call five five five, one two three, four five six seven now"),
    ("Dial +1 555 123 4567", "Dial plus one, five five five, one two three, four five six seven"),
    ("Ring +44 20 7946 0958.", "Ring plus four four, two zero, seven nine four six, zero nine five eight."),
    ("On 12/25/2023 we met.", "On December twenty-fifth, twenty twenty-three we met."),
    ("On 25/12/2023 we met.", "On December twenty-fifth, twenty twenty-three we met."),
    ("Due 2024-03-01.", "Due March first, twenty twenty-four."),
    ("See https://example.com/docs.", "See example dot com slash docs."),
    ("Visit www.omni.dev today", "Visit w w w dot omni dot dev today"),
    ("Mail a.b@example.org.", "Mail a dot b at example dot org."),
])
def test_spoken_form(written, spoken):
    assert spoken_form(written) == spoken


@pytest.mark.parametrize("text", ["Scores were 10-20.", "Take 3/4 of it.", "Room 13/45/2023 is not a date."])
def test_what_only_looks_like_a_phone_number_or_date_is_left_to_the_number_rules(text):
    out = spoken_form(text)
    assert "December" not in out and "," not in out.rstrip(".")


def test_print_normalized_shows_the_spoken_text_of_the_pipeline(tmp_path):
    result = omni("synthesize", "Call 555-123-4567 on 12/25/2023, or see https://omni.dev/docs.", "--print-normalized", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ("Call five five five, one two three, four five six seven on December twenty-fifth, "
                                     "twenty twenty-three, or see omni dot dev slash docs.")
    assert not list(tmp_path.iterdir())  # nothing synthesized, nothing written
