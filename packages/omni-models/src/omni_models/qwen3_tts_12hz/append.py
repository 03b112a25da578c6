"""True append: text added to a Qwen3-TTS request while its talker already generates.

The talker reads the text that does not fit its prompt one token per frame (``prompt.py``:
``trailing``, then ``tts_eos``, then ``tts_pad``), so a request can start speaking with part
of its text and take the rest as it arrives. A request submitted with ``input_open: true``:

* preprocessing keeps its body's token ids in an :class:`OpenText` (registered per request
  id in :data:`OPEN_TEXTS`, process memory like the prepared request) and lays its prompt out
  in the streaming-text layout for every variant (the reference's ``non_streaming_mode=False``);
* each appended piece is tokenised on its own and extends the ids (the tokenisation caveat:
  a word split across two pieces is tokenised as two words; the WebSocket server appends
  whole clauses, so pieces begin at a word boundary);
* the talker row, once it has fed every token it has while the input is still open, is held:
  it keeps its cache slot, does not sample and does not move; the scheduler's other rows go on;
* closing the input adds ``tts_eos`` and the row runs to its end as a whole-text request does.

A request given its text in pieces produces the codes of the same token sequence given at
once (same seed): the engine test proves it. A request held open is bounded by its deadline
(the runtime's ``request_timeout`` or ``submit(timeout=)``) and by ``MAX_CHARS`` in all.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch

from omni_runtime.errors import InvalidRequest

from .request import MAX_CHARS

#: Appended pieces kept for requests whose preprocessing has not run yet (their entry payload is
#: being prepared while the first pieces arrive), and ended requests remembered to drop late pieces.
REMEMBERED = 1024
#: An open request whose talker never took it (cancelled between preprocessing and the engine) is
#: forgotten after this long, as an unclaimed prepared request is (``handoff.PREPARED_TTL_S``).
UNCLAIMED_TTL_S = 600.0


class OpenText:
    """The body token ids of a request whose input is open; thread-safe (appends arrive on the worker's
    event loop, the talker reads on its scheduler thread)."""

    def __init__(self, ids: list[int], chars: int) -> None:
        self._cond = threading.Condition()
        self.ids = list(ids)
        self.chars = chars
        self.closed = False
        self._wake: Callable[[], None] = lambda: None
        # bound by the engine once the prompt is built
        self._embed: Callable[[list[int]], torch.Tensor] | None = None
        self._trailing: torch.Tensor | None = None
        self._consumed = 0
        self._eos: torch.Tensor | None = None
        self._pad: torch.Tensor | None = None
        self._ended = False

    # -- the appending side (worker event loop) ------------------------------------------
    def extend(self, ids: list[int], chars: int) -> None:
        with self._cond:
            if self.closed:
                raise InvalidRequest("text was appended after the request's input was closed", param="text")
            if self.chars + chars > MAX_CHARS:
                raise InvalidRequest(f"the appended text would make {self.chars + chars} characters; the limit is {MAX_CHARS}", param="text")
            self.ids.extend(ids)
            self.chars += chars
            self._cond.notify_all()
        self._wake()

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()
        self._wake()

    # -- the engine side --------------------------------------------------------------------
    def wait_for(self, count: int, stop: Callable[[], bool], poll_s: float = 0.05) -> tuple[list[int], bool]:
        """Block until ``count`` ids arrived or the input closed (or ``stop()``); the ids so far and whether closed."""
        with self._cond:
            while len(self.ids) < count and not self.closed and not stop():
                self._cond.wait(poll_s)
            return list(self.ids), self.closed

    def bind(self, consumed: int, trailing: torch.Tensor, embed: Callable[[list[int]], torch.Tensor], eos: torch.Tensor,
             pad: torch.Tensor, wake: Callable[[], None]) -> None:
        """The prompt holds ``ids[:consumed]`` (the part of it that trails included in ``trailing``)."""
        with self._cond:
            self._consumed, self._trailing, self._embed, self._eos, self._pad, self._wake = consumed, trailing, embed, eos, pad, wake

    def ready(self, step: int) -> bool:
        """Scheduler thread: whether the text the row feeds at ``step`` is known (embeds what arrived)."""
        assert self._trailing is not None and self._embed is not None
        if step < self._trailing.shape[0] or self._ended:
            return True
        with self._cond:
            parts = [self._trailing]
            if len(self.ids) > self._consumed:
                parts.append(self._embed(self.ids[self._consumed :]))
                self._consumed = len(self.ids)
            if self.closed:
                parts.append(self._eos[None])
                self._ended = True
            if len(parts) > 1:
                self._trailing = torch.cat(parts)
        return step < self._trailing.shape[0] or self._ended

    def at(self, step: int) -> torch.Tensor:
        """The text embedding fed at ``step`` (``ready(step)`` was true): the next token, ``tts_eos``, then ``tts_pad``."""
        assert self._trailing is not None and self._pad is not None
        return self._trailing[step] if step < self._trailing.shape[0] else self._pad


class OpenTexts:
    """Open requests of this process by request id, and the pieces that arrived before their preprocessing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open: dict[str, OpenText] = {}
        self.unclaimed: OrderedDict[str, float] = OrderedDict()
        """Open requests the talker has not taken yet, with when they were registered."""
        self.early: OrderedDict[str, list[tuple[list[int], int, bool]]] = OrderedDict()
        self.ended: OrderedDict[str, None] = OrderedDict()

    def register(self, rid: str, text: OpenText) -> None:
        """Preprocessing: ``rid``'s input is open; pieces that came first are applied now, in order."""
        with self._lock:  # held while applying: a piece arriving now waits for the earlier ones
            now = time.monotonic()
            while self.unclaimed and next(iter(self.unclaimed.values())) < now - UNCLAIMED_TTL_S:
                self.open.pop(self.unclaimed.popitem(last=False)[0], None)
            self.open[rid] = text
            self.unclaimed[rid] = now
            for ids, chars, final in self.early.pop(rid, []):
                self._apply(text, ids, chars, final)

    def append(self, rid: str, ids: list[int], chars: int, final: bool) -> None:
        with self._lock:
            text = self.open.get(rid)
            if text is None:
                if rid in self.ended:
                    return  # the talker already ended (max_new_tokens, deadline): a late piece has nothing to extend
                self.early.setdefault(rid, []).append((ids, chars, final))
                while len(self.early) > REMEMBERED:
                    self.early.popitem(last=False)
                return
            self._apply(text, ids, chars, final)

    @staticmethod
    def _apply(text: OpenText, ids: list[int], chars: int, final: bool) -> None:
        if ids:
            text.extend(ids, chars)
        if final:
            text.close()

    def refuse_early(self, rid: str) -> None:
        """Preprocessing of a whole-text request: pieces appended to it are a client mistake."""
        with self._lock:
            early = self.early.pop(rid, None)
        if early:
            raise InvalidRequest("text was appended to a request submitted without input_open: true", param="input_open")

    def take(self, rid: str) -> OpenText | None:
        with self._lock:
            self.unclaimed.pop(rid, None)
            return self.open.get(rid)

    def end(self, rid: str) -> None:
        with self._lock:
            text = self.open.pop(rid, None)
            self.unclaimed.pop(rid, None)
            self.early.pop(rid, None)
            self.ended[rid] = None
            while len(self.ended) > REMEMBERED:
                self.ended.popitem(last=False)
        if text is not None:
            with text._cond:
                text._cond.notify_all()


OPEN_TEXTS = OpenTexts()
"""This process's open requests (preprocessing and the talker engine share a process, ``handoff``)."""


def appended_text(data: Any) -> str:
    """An appended piece: a string, or ``{"text": str}``; None (close only) is empty."""
    if data is None:
        return ""
    text = data.get("text") if isinstance(data, dict) else data
    if not isinstance(text, str):
        raise InvalidRequest(f"appended input must be a string or {{'text': str}}, got {type(text).__name__}", param="text")
    return text
