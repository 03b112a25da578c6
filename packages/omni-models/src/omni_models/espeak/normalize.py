"""Sentence splitting and normalisation for the espeak reference pipeline.

The preprocessing stage turns request text into the sentences the engine speaks
one at a time. Sentences are found by pysbd (a maintained rule-based splitter
that knows "Dr.", "Jan." and "U.S.A." do not end a sentence) on the text as
written, then each is turned into its spoken form
(:func:`omni_models.common.spoken.spoken_form`).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from omni_models.common.spoken import spoken_form

_PARAGRAPH_RE = re.compile(r"\n\s*\n")
_CLAUSE_BREAK_RE = re.compile(r"(?<=[,;:])\s+")


_PER_THREAD = threading.local()


def _segmenter():
    """This thread's pysbd segmenter. A pysbd Segmenter keeps the text of the call in progress on itself, so one
    shared by the stage's request threads mixed their texts up: under 60 concurrent clients, answers came back
    with sentences of theirs missing (or "nothing to speak")."""
    segmenter = getattr(_PER_THREAD, "segmenter", None)
    if segmenter is None:
        import pysbd

        segmenter = _PER_THREAD.segmenter = pysbd.Segmenter(language="en", clean=False)
    return segmenter


def normalize_text(text: str) -> str:
    """Spoken form of ``text``: quotes, abbreviations, numbers, dates, times and whitespace normalised."""
    return spoken_form(text)


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
    """Sentences of ``text`` in order (pysbd), each at most ``max_chars`` long (at word level)."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    sentences: list[str] = []
    for raw in _segmenter().segment(text):
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
    """Split ``text`` as written (a blank line always ends a sentence), then speak each sentence."""
    sentences: list[str] = []
    for paragraph in _PARAGRAPH_RE.split(text):
        for written in split_sentences(paragraph, max_chars=1 << 30):
            spoken = spoken_form(written)
            if _is_speakable(spoken):
                sentences.extend(_cap_length(spoken, max_sentence_chars))
    return PreparedText(normalized=" ".join(sentences), sentences=tuple(sentences))
