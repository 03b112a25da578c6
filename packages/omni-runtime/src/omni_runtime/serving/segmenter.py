"""Cut text that arrives in pieces into segments worth synthesising, as soon as they are complete.

A voice agent's language model streams its answer a few characters at a time; waiting for
the whole answer would add its full generation time to the first audio. pysbd (rule-based,
abbreviation- and number-aware) decides where sentences end: every sentence but the last
one it finds is complete. The last, still growing one is cut early at a clause boundary
(a comma, semicolon, colon or dash followed by a space) once it holds ``clause_chars``
characters (``first_clause_chars`` for an answer's first segment, so its audio starts
early), and cut at the last space before ``max_segment_chars`` when it has none, so
neither a long sentence nor text without punctuation holds the audio back. ``flush``
hands out whatever is left. Concatenating every segment gives back the input exactly.

pysbd's cost grows faster than the text (a 4,096-character delta of ``"a. "`` took 1.7 s
in one call), so it never sees more than ``window_chars`` at once: held-back text longer
than that is cut a window at a time, each window's last sentence carried into the next.
The work per delta is then linear in its length. A segmenter is a mutable value of one
socket; the pysbd object behind it is per thread (pysbd keeps each call's text on the
object, so one shared by threads mixes their texts up).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

_BOUNDARY_CHARS = frozenset(".!?;:,\n\u2014\u2013\u2026\u3002\uff01\uff1f")
"""Characters after which a cut may become possible: only then is pysbd consulted again."""
_CLAUSE = re.compile(r"[,;:\u2014\u2013](?=\s)|\s[-\u2013\u2014](?=\s)")
_SPEAKABLE = re.compile(r"\w")
_TERMINAL = re.compile(r"[.!?\u2026\u3002\uff01\uff1f][\"')\]\u201d\u2019]*\s+$")


@dataclass(frozen=True)
class SegmentLimits:
    clause_chars: int = 60
    """A growing sentence this long is cut at its last clause boundary."""
    first_clause_chars: int = 20
    """The same for an answer's first segment: shorter, so the first audio starts sooner."""
    max_segment_chars: int = 300
    """No segment is longer: past it the text is cut at the last space (or hard, without one)."""
    max_pending_chars: int = 4096
    """Text held back at most (not yet a segment); a delta beyond it is refused."""
    language: str = "en"
    window_chars: int = 640
    """pysbd sees at most this much text per call (more than ``max_segment_chars``, so a window always
    yields a segment); longer held-back text is cut one window at a time."""


_PER_THREAD = threading.local()


def _segmenter(language: str) -> Any:
    """This thread's pysbd segmenter for ``language`` (a pysbd Segmenter holds the text of the call in progress)."""
    import pysbd

    cached: dict[str, Any] = _PER_THREAD.__dict__.setdefault("segmenters", {})
    if language not in cached:
        cached[language] = pysbd.Segmenter(language=language, clean=False, char_span=False)
    return cached[language]


def speakable(text: str) -> bool:
    """Whether a segment holds anything to say (letters or digits), so whitespace or a lone '...' is not sent to a model."""
    return bool(_SPEAKABLE.search(text))


class TextSegmenter:
    """Feed deltas, get complete segments back, in order; never loses or reorders a character."""

    def __init__(self, limits: SegmentLimits | None = None) -> None:
        self.limits = limits or SegmentLimits()
        self._pending = ""
        self._first = True
        """No segment has been handed out since the last flush or reset (the answer's first is still to come)."""

    @property
    def pending(self) -> str:
        return self._pending

    def would_overflow(self, delta: str) -> bool:
        return len(self._pending) + len(delta) > self.limits.max_pending_chars

    def would_cut(self, delta: str) -> bool:
        """Whether :meth:`feed` of ``delta`` asks pysbd (else it only appends, cheap enough for an event loop)."""
        window = self._pending[-1:] + delta  # a boundary just before the delta's first space counts too
        return any(ch in _BOUNDARY_CHARS for ch in window) or len(self._pending) + len(delta) > self.limits.max_segment_chars

    def feed(self, delta: str) -> list[str]:
        """Add ``delta``; return the segments it completed (often none)."""
        cut = self.would_cut(delta)
        self._pending += delta
        return self._cut() if cut else []

    def flush(self) -> list[str]:
        """Every held-back character as segments (each at most ``max_segment_chars``)."""
        out = self._cut()
        while self._pending:
            head = self._split_long(self._pending) if len(self._pending) > self.limits.max_segment_chars else self._pending
            out.append(head)
            self._pending = self._pending[len(head):]
        self._first = True
        return out

    def reset(self) -> str:
        """Drop held-back text (barge-in); returns what was dropped."""
        dropped, self._pending = self._pending, ""
        self._first = True
        return dropped

    def _cut(self) -> list[str]:
        """Segments of the held-back text, pysbd reading one window of it at a time."""
        window = max(self.limits.window_chars, self.limits.max_segment_chars + 1)
        out: list[str] = []
        while True:
            head, rest = self._pending[:window], self._pending[window:]
            self._pending = head
            got = self._cut_window()
            out += got
            self._pending += rest
            if not rest or not got:
                return out

    def _cut_window(self) -> list[str]:
        sentences = [s for s in _segmenter(self.limits.language).segment(self._pending) if s]
        if "".join(sentences) != self._pending:  # pysbd normalised something: fall back to no sentence cut
            sentences = [self._pending]
        out = sentences[:-1]
        last = sentences[-1] if sentences else ""
        if self._complete(last):
            out.append(last)
            last = ""
        while len(last) > self.limits.max_segment_chars:
            head = self._split_long(last)
            out.append(head)
            last = last[len(head):]
        if len(last) >= (self.limits.first_clause_chars if self._first and not out else self.limits.clause_chars):
            clauses = [m.end() for m in _CLAUSE.finditer(last)]
            if clauses:
                cut = clauses[-1]
                while cut < len(last) and last[cut].isspace():
                    cut += 1
                out.append(last[:cut])
                last = last[cut:]
        self._pending = last
        self._first = self._first and not out
        return out

    def _complete(self, sentence: str) -> bool:
        """A last sentence that ends in terminal punctuation and a space is complete unless pysbd would join
        the next word to it (an abbreviation such as "Dr. "): asked with a probe word after it."""
        if not sentence[-1:].isspace() or not _TERMINAL.search(sentence):
            return False
        probe = [s for s in _segmenter(self.limits.language).segment(sentence + "Next") if s]
        return len(probe) >= 2 and probe[-1] == "Next"

    def _split_long(self, text: str) -> str:
        limit = self.limits.max_segment_chars
        clauses = [m.end() for m in _CLAUSE.finditer(text, 0, limit)]
        cut = clauses[-1] if clauses else text.rfind(" ", 0, limit) + 1
        return text[: cut if cut > 0 else limit]


def _last_gap(text: str) -> int:
    """Where the whitespace before ``text``'s last word starts (0: none before it). A scan from the end: the
    regex ``\\s+\\S*$`` backtracks quadratically over a long run of spaces."""
    end = len(text)
    while end > 0 and not text[end - 1].isspace():
        end -= 1
    start = end
    while start > 0 and text[start - 1].isspace():
        start -= 1
    return start if end > 0 else 0


class WordPieces:
    """Cut text that arrives in pieces at word boundaries, for a model that takes text while it generates.

    True append (docs/voice-agents.md) does not wait for a clause: every word is handed out
    as soon as the next one begins. A piece ends before the whitespace that starts the next
    word, so every piece after the first begins with its space and a byte-level BPE tokeniser
    (which joins a space to the word after it) makes the tokens of the whole text from the
    pieces. ``flush`` hands out the rest; concatenating every piece gives back the input.
    """

    def __init__(self, limits: SegmentLimits | None = None) -> None:
        self.limits = limits or SegmentLimits()
        self._pending = ""

    @property
    def pending(self) -> str:
        return self._pending

    def feed(self, delta: str) -> list[str]:
        """Add ``delta``; the complete words it made (one piece, or none)."""
        self._pending += delta
        cut = _last_gap(self._pending)
        if cut == 0 and len(self._pending) > self.limits.max_segment_chars:
            cut = self.limits.max_segment_chars  # no space at all: cut hard rather than hold it back
        if cut == 0:
            return []
        piece, self._pending = self._pending[:cut], self._pending[cut:]
        return [piece]

    def flush(self) -> list[str]:
        out, self._pending = self._pending, ""
        return [out] if out else []

    def reset(self) -> str:
        dropped, self._pending = self._pending, ""
        return dropped
