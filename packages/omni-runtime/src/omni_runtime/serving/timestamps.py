"""Word timestamps in answers: the request field ``timestamps: "word"`` and where the words go.

The words come from the pipeline's optional ``aligner`` stage (off unless the deployment
sets ``--stages.aligner.enabled true``): it attaches ``words`` (``{"word", "start", "end"}``,
seconds from the start of the request's audio) to the audio chunks they belong to, and all
of them to its final payload. This module checks that a request asking for them can get
them, and collects them while the audio streams, so each answer shape (SSE, WebSocket,
batch JSON) sends them next to its audio.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import bad_request

ALIGNER_STAGE = "aligner"
ENABLE_HINT = "start the server with --stages.aligner.enabled true (a pipeline that declares the optional aligner stage), or drop timestamps"


def has_aligner(topology: Any) -> bool:
    stages = getattr(topology, "stages", None) or ()
    return any(getattr(stage, "name", None) == ALIGNER_STAGE for stage in stages)


def check_timestamps(extra: Mapping[str, Any], topology: Any, *, shape: str | None = None) -> bool:
    """Whether the request asks for word timestamps; a 400 when this server or this answer shape cannot give them.

    ``shape`` names an answer form that has nowhere to put them (a whole audio file)."""
    if extra.get("timestamps") != "word":
        return False
    if topology is not None and not has_aligner(topology):
        raise bad_request(f"timestamps: 'word' needs the aligner stage, which this server's pipeline does not run; {ENABLE_HINT}",
                          param="timestamps", code="timestamps_unavailable")
    if shape is not None:
        raise bad_request(f"timestamps: 'word' has no place in {shape}; ask with stream_format: 'sse', over the WebSocket stream "
                          "or through /v1/audio/speech/batch", param="timestamps", code="timestamps_unavailable")
    return True


class WordLog:
    """The words of one request, as its chunks and final payload bring them (chunk words win: they stream)."""

    def __init__(self) -> None:
        self.words: list[dict[str, Any]] = []
        self._sent = 0
        self._streamed = False

    def chunk(self, chunk: Mapping[str, Any]) -> None:
        words = chunk.get("words") if isinstance(chunk, Mapping) else None
        if words:
            self._streamed = True
            self.words.extend(_clean(words))

    def result(self, data: Mapping[str, Any]) -> None:
        words = data.get("words") if isinstance(data, Mapping) else None
        if words and not self._streamed:
            self.words.extend(_clean(words))

    def take_new(self) -> list[dict[str, Any]]:
        """The words not handed out yet."""
        new = self.words[self._sent:]
        self._sent = len(self.words)
        return new


def _clean(words: Any) -> list[dict[str, Any]]:
    out = []
    for word in words:
        if isinstance(word, Mapping) and isinstance(word.get("word"), str):
            out.append({"word": word["word"], "start": float(word["start"]), "end": float(word["end"])})
    return out


def shifted(words: list[dict[str, Any]], offset: float) -> list[dict[str, Any]]:
    return [{**w, "start": round(w["start"] + offset, 4), "end": round(w["end"] + offset, 4)} for w in words]
