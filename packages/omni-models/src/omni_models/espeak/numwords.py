"""English number words for the text normaliser.

The synthesiser reads whatever text it is given; spelling numbers out before
sentence splitting keeps "3.5" or "1,200" from being cut at the punctuation and
makes the text the engine sees independent of its own number rules.
"""

from __future__ import annotations

from omni_models.common.text import number_to_words

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_ORDINAL_IRREGULAR = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}


def cardinal(n: int) -> str:
    """``1234`` -> ``"one thousand two hundred thirty-four"``; negatives say "minus"."""
    return "minus " + number_to_words(-n) if n < 0 else number_to_words(n)


def ordinal(n: int) -> str:
    """``21`` -> ``"twenty-first"``."""
    words = cardinal(n)
    head, sep, last = words.rpartition(" ")
    prefix, dash, unit = last.rpartition("-")
    if unit in _ORDINAL_IRREGULAR:
        unit = _ORDINAL_IRREGULAR[unit]
    elif unit.endswith("y"):
        unit = unit[:-1] + "ieth"
    else:
        unit = unit + "th"
    return head + sep + prefix + dash + unit


def digits(text: str) -> str:
    """Read a digit string one digit at a time (decimal fractions, long ids)."""
    return " ".join(_ONES[int(ch)] for ch in text if ch.isdigit())


def decimal(text: str) -> str:
    """``"3.14"`` -> ``"three point one four"``; ``".5"`` -> ``"zero point five"``."""
    whole, _, frac = text.partition(".")
    head = cardinal(int(whole)) if whole else "zero"
    return f"{head} point {digits(frac)}" if frac else head
