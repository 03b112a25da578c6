"""Text normalisation and sentence splitting for the espeak reference pipeline.

The preprocessing stage turns request text into the sentences the engine speaks
one at a time. Expanding abbreviations and numbers *before* splitting is what
keeps "Dr. Smith paid $3.50." one sentence instead of three.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from . import numwords

#: Abbreviations read as words. Keys are matched case-sensitively with their dot.
ABBREVIATIONS: dict[str, str] = {
    "Mr.": "Mister",
    "Mrs.": "Missus",
    "Ms.": "Miz",
    "Dr.": "Doctor",
    "Prof.": "Professor",
    "Sr.": "Senior",
    "Jr.": "Junior",
    "Mt.": "Mount",
    "Gen.": "General",
    "Capt.": "Captain",
    "Lt.": "Lieutenant",
    "Sgt.": "Sergeant",
    "Inc.": "Incorporated",
    "Ltd.": "Limited",
    "Co.": "Company",
    "Corp.": "Corporation",
    "Ave.": "Avenue",
    "Rd.": "Road",
    "approx.": "approximately",
    "dept.": "department",
    "vs.": "versus",
    "etc.": "et cetera",
    "e.g.": "for example",
    "i.e.": "that is",
    "a.m.": "A M",
    "p.m.": "P M",
}

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": ", "})
_ABBREV_RE = re.compile(r"(?<![\w.])(" + "|".join(re.escape(k) for k in sorted(ABBREVIATIONS, key=len, reverse=True)) + r")(?!\w)")
# "No. 5" reads "number five", but "No." before anything else is the word "no".
_NUMBER_SIGN_RE = re.compile(r"\b(?:No|no)\.\s*(?=\d)")
# "St." is "Saint" before a name and "Street" after one.
_SAINT_RE = re.compile(r"(?<![\w.])St\.(?=\s+[A-Z])")
_STREET_RE = re.compile(r"(?<![\w.])St\.")
_PARAGRAPH_RE = re.compile(r"\n\s*\n")
_CURRENCY_RE = re.compile(r"([$£€])\s?(\d[\d,]*)(?:\.(\d{1,2}))?\b")
_PERCENT_RE = re.compile(r"(-?\d[\d,]*(?:\.\d+)?)\s?%")
_ORDINAL_RE = re.compile(r"\b(\d[\d,]*)(st|nd|rd|th)\b", re.IGNORECASE)
_DECIMAL_RE = re.compile(r"(?<![\d.])(-?)(\d[\d,]*)?\.(\d+)\b")
_INTEGER_RE = re.compile(r"(?<![\w.])(-?)(\d{1,3}(?:,\d{3})+|\d+)\b")
_SPACE_RE = re.compile(r"\s+")
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_CLAUSE_BREAK_RE = re.compile(r"(?<=[,;:])\s+")

_CURRENCY_NAMES = {"$": ("dollar", "cent"), "£": ("pound", "penny"), "€": ("euro", "cent")}


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"one {word}"
    return f"{numwords.cardinal(n)} {'pence' if word == 'penny' else word + 's'}"


def _currency(match: re.Match[str]) -> str:
    major_name, minor_name = _CURRENCY_NAMES[match.group(1)]
    major = _int(match.group(2))
    minor_text = match.group(3)
    spoken = _plural(major, major_name)
    if minor_text:
        minor = int(minor_text.ljust(2, "0"))
        if minor:
            spoken += f" and {_plural(minor, minor_name)}"
    return spoken


def _percent(match: re.Match[str]) -> str:
    return _number_words(match.group(1)) + " percent"


def _number_words(text: str) -> str:
    negative = text.startswith("-")
    body = text.lstrip("-").replace(",", "")
    words = numwords.decimal(body) if "." in body else numwords.cardinal(int(body))
    return ("minus " if negative else "") + words


def _ordinal(match: re.Match[str]) -> str:
    return numwords.ordinal(_int(match.group(1)))


def _decimal(match: re.Match[str]) -> str:
    sign, whole, frac = match.groups()
    return ("minus " if sign else "") + numwords.decimal(f"{(whole or '').replace(',', '')}.{frac}")


def _integer(match: re.Match[str]) -> str:
    sign, body = match.groups()
    return ("minus " if sign else "") + numwords.cardinal(_int(body))


def normalize_text(text: str) -> str:
    """Spoken form of ``text``: quotes, abbreviations, numbers and whitespace normalised."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    text = _NUMBER_SIGN_RE.sub("number ", text)
    text = _STREET_RE.sub("Street", _SAINT_RE.sub("Saint", text))
    text = _ABBREV_RE.sub(lambda m: ABBREVIATIONS[m.group(1)], text)
    text = _CURRENCY_RE.sub(_currency, text)
    text = _PERCENT_RE.sub(_percent, text)
    text = _ORDINAL_RE.sub(_ordinal, text)
    text = _DECIMAL_RE.sub(_decimal, text)
    text = _INTEGER_RE.sub(_integer, text)
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return _SPACE_RE.sub(" ", text).strip()


def _is_speakable(sentence: str) -> bool:
    return any(ch.isalnum() for ch in sentence)


def _cap_length(sentence: str, max_chars: int) -> list[str]:
    """Split an over-long sentence at clause breaks, then at spaces, to bound first-audio latency."""
    if len(sentence) <= max_chars:
        return [sentence]
    pieces: list[str] = []
    current = ""
    for clause in _CLAUSE_BREAK_RE.split(sentence):
        for word in clause.split(" ") if len(clause) > max_chars else [clause]:
            candidate = f"{current} {word}".strip() if current else word
            if len(candidate) > max_chars and current:
                pieces.append(current)
                current = word
            else:
                current = candidate
    if current:
        pieces.append(current)
    return pieces


def split_sentences(text: str, max_chars: int = 300) -> list[str]:
    """Sentences of already normalised text, in order, each at most ``max_chars`` long (at word level)."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    sentences: list[str] = []
    for raw in _SENTENCE_END_RE.split(text):
        raw = raw.strip()
        if _is_speakable(raw):
            sentences.extend(_cap_length(raw, max_chars))
    return sentences


@dataclass(frozen=True)
class PreparedText:
    """What preprocessing hands the engine: the spoken form, sentence by sentence."""

    normalized: str
    sentences: tuple[str, ...]


def prepare(text: str, max_sentence_chars: int = 300) -> PreparedText:
    """Normalise ``text`` and split it; a blank line always ends a sentence."""
    paragraphs = [normalize_text(p) for p in _PARAGRAPH_RE.split(text)]
    sentences = [s for p in paragraphs for s in split_sentences(p, max_sentence_chars)]
    return PreparedText(normalized=" ".join(p for p in paragraphs if p), sentences=tuple(sentences))
