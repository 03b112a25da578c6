"""Text normalisation and sentence splitting of the espeak reference pipeline."""

from __future__ import annotations

import pytest

from omni_models.espeak.normalize import normalize_text, prepare, split_sentences


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("I have 2 apples", "I have two apples"),
        ("It holds 1,234 items", "It holds one thousand two hundred thirty-four items"),
        ("Pi is 3.14", "Pi is three point one four"),
        ("Take .5 of it", "Take zero point five of it"),
        ("It is -7 outside", "It is minus seven outside"),
        ("She came 1st and he came 22nd", "She came first and he came twenty-second"),
        ("The 3rd, 12th and 40th", "The third, twelfth and fortieth"),
        ("It costs $3.50", "It costs three dollars and fifty cents"),
        ("It costs $1", "It costs one dollar"),
        ("A fee of £2.05", "A fee of two pounds and five pence"),
        ("Up 50% today", "Up fifty percent today"),
        ("Room No. 5", "Room number five"),
    ],
)
def test_numbers_are_spelled_out(text: str, spoken: str) -> None:
    assert normalize_text(text) == spoken


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("Dr. Smith met Mr. and Mrs. Jones", "Doctor Smith met Mister and Missus Jones"),
        ("St. James lives on Baker St. now", "Saint James lives on Baker Street now"),
        ("fruit, e.g. apples", "fruit, for example apples"),
        ("cats vs. dogs", "cats versus dogs"),
    ],
)
def test_abbreviations_are_expanded(text: str, spoken: str) -> None:
    assert normalize_text(text) == spoken


def test_whitespace_quotes_and_control_characters_are_normalised() -> None:
    assert normalize_text("  \u201cHello\u201d,\t\tit\u2019s\x07 me\n\n ") == '"Hello", it\'s me'


def test_sentences_split_at_terminal_punctuation_only() -> None:
    sentences = split_sentences(normalize_text("Dr. Smith paid $3.50. Was it 2.5 times more? Yes! Done"))
    assert sentences == [
        "Doctor Smith paid three dollars and fifty cents.",
        "Was it two point five times more?",
        "Yes!",
        "Done",
    ]


def test_blank_line_ends_a_sentence() -> None:
    assert prepare("First paragraph\n\nSecond one").sentences == ("First paragraph", "Second one")


def test_long_sentences_are_capped_at_clause_then_word_boundaries() -> None:
    text = "alpha beta gamma, " * 20 + "end."
    pieces = split_sentences(text, max_chars=60)
    assert all(len(p) <= 60 for p in pieces)
    assert " ".join(pieces).split() == text.split()


def test_unspeakable_text_has_no_sentences() -> None:
    assert prepare(" ... !? ").sentences == ()


def test_max_chars_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_chars must be >= 1"):
        split_sentences("text", max_chars=0)


# Tricky inputs and the words a listener must hear (sentence splitting by pysbd, numbers by num2words).
TRICKY = [
    ("I met him on Jan. 5. He was late.", ["I met him on January fifth.", "He was late."]),
    ("She moved to the U.S.A. in 1999. It was cold.", ["She moved to the U S A in nineteen ninety-nine.", "It was cold."]),
    ("Meet at 5 p.m. Then we eat.", ["Meet at five P M.", "Then we eat."]),
    ("The meeting is at 3:30 pm.", ["The meeting is at three thirty P M."]),
    ("Call me at 9:05 a.m. tomorrow.", ["Call me at nine oh five A M tomorrow."]),
    ("Lunch is at 12:00.", ["Lunch is at twelve o'clock."]),
    ("Doors open at 7 pm.", ["Doors open at seven P M."]),
    ("It was built in 1905 and sold in 2005.", ["It was built in nineteen oh five and sold in two thousand five."]),
    ("Born on March 3rd, 1987.", ["Born on March third, nineteen eighty-seven."]),
    ("Music of the 1980s.", ["Music of the nineteen eighties."]),
    ("We sold 1999 tickets.", ["We sold one thousand nine hundred ninety-nine tickets."]),
    ("It costs $3.50, not $1.", ["It costs three dollars and fifty cents, not one dollar."]),
    ("Pay £2.05 or €10 now.", ["Pay two pounds and five pence or ten euros now."]),
    ("She came 1st, he came 22nd and I came 103rd.", ["She came first, he came twenty-second and I came one hundred third."]),
    ("Dr. Smith paid $3.50. Was it 2.5 times more?", ["Doctor Smith paid three dollars and fifty cents.", "Was it two point five times more?"]),
    ("It holds 1,234,567 items.", ["It holds one million two hundred thirty-four thousand five hundred sixty-seven items."]),
]


@pytest.mark.parametrize(("text", "sentences"), TRICKY, ids=[t for t, _ in TRICKY])
def test_tricky_inputs_are_split_and_spoken(text: str, sentences: list[str]) -> None:
    assert list(prepare(text).sentences) == sentences
