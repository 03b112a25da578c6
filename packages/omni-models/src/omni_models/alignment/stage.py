"""The ``aligner`` stage: passes the vocoder's audio on and says when each word is spoken.

A pipeline declares it after its terminal stage with ``optional: true``, so it is off
(removed, no cost) until a deployment sets ``--stages.aligner.enabled true``; it is placed
like any stage (``process``). Two ways to time the words (``method``):

- ``events``: the engine reported where it spoke each word (``word_marks`` in the
  vocoder's chunks: ``{"rate": r, "words": [[word, start, end], ...]}`` in samples at ``r``
  from the request's first sample). The espeak pipeline does, from libespeak-ng's own
  word events: exact, free, and streamed with the audio they belong to.
- ``forced``: a forced aligner places the request's text in the audio once it is
  complete (PocketSphinx, :mod:`.sphinx`; ``model_dir`` for another model than the one
  the package ships). The terminal payload must carry the text (``normalized_text`` or
  ``text``).

``auto`` (the default) uses the events when the stream carries them, else forced alignment.
Only a request that asks (``timestamps: "word"``) is timed; the others pass through.
Words leave as ``{"word", "start", "end"}`` (seconds from the start of the response's
audio) in the chunk's ``words`` and, all of them, in the final payload's ``words``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from omni_runtime import StageConfigError, StageContext, StagePayload

from .sphinx import SphinxAligner

METHODS = ("auto", "events", "forced")


def _from_marks(marks: dict[str, Any]) -> list[dict[str, Any]]:
    rate = float(marks["rate"])
    return [{"word": str(word), "start": round(start / rate, 4), "end": round(end / rate, 4)} for word, start, end in marks["words"]]


class Aligner:
    def __init__(self, method: str, model_dir: str | None) -> None:
        self.method = method
        self.forced = SphinxAligner(model_dir) if method == "forced" else None
        self._model_dir = model_dir

    def _forced(self) -> SphinxAligner:
        if self.forced is None:
            self.forced = SphinxAligner(self._model_dir)
        return self.forced

    def consume(self, chunks: Iterable[dict[str, Any]], ctx: StageContext) -> StagePayload:
        words: list[dict[str, Any]] = []
        kept: list[np.ndarray] = []
        rate = 0
        seconds = 0.0
        for chunk in chunks:
            out = {k: v for k, v in chunk.items() if k != "word_marks"}
            audio, rate = chunk["audio"], int(chunk["sample_rate"])
            marks = chunk.get("word_marks")
            if marks is not None and self.method != "forced":
                timed = _from_marks(marks)
                words.extend(timed)
                out["words"] = timed
            elif self.method != "events":
                kept.append(audio.detach().float().reshape(-1, audio.shape[-1]).mean(0).cpu().numpy())
            seconds += audio.shape[-1] / rate
            ctx.emit(out)
        upstream = ctx.upstream_payload
        data = dict(upstream.data) if upstream is not None else {}
        wanted = data.get("timestamps") == "word"
        if wanted and not words and kept and self.method != "events":
            text = data.get("normalized_text") or data.get("text")
            if not isinstance(text, str):
                raise ValueError("the aligner needs the request's text in the terminal payload ('normalized_text' or 'text') to align words")
            audio = np.concatenate(kept)
            words = [{"word": w.word, "start": round(w.start, 4), "end": round(min(w.end, seconds), 4)} for w in self._forced().align(audio, rate, text)]
        if wanted:
            data["words"] = words
        return StagePayload(request_id=ctx.request_id, data=data)


def build_aligner(method: str = "auto", model_dir: str | None = None) -> Aligner:
    if method not in METHODS:
        raise StageConfigError("method", method, f"the aligner times words by one of {', '.join(METHODS)}",
                               "set method: auto (engine events when the stream has them, else forced alignment)")
    return Aligner(method, model_dir)
