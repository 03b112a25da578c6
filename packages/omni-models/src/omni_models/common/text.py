"""Text normalisation and a deterministic byte tokenizer.

Real TTS front ends normalise text (numbers, symbols, whitespace) before a subword tokenizer;
the spoken form comes from :mod:`.spoken` (num2words underneath).
The dummy-weight models here need a tokenizer that is deterministic, reversible and has no
vocabulary file, so ids are UTF-8 bytes shifted past a few special tokens.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from omni_runtime.errors import InvalidRequest

from .spoken import cardinal, spoken_form

_SYMBOLS = {"&": " and ", "%": " percent ", "+": " plus ", "@": " at ", "=": " equals "}
_WS = re.compile(r"\s+")


def number_to_words(n: int) -> str:
    """Spell a non-negative integer in English words (num2words, read the American way)."""
    if n < 0:
        raise ValueError(f"number_to_words expects a non-negative integer, got {n}")
    return cardinal(n)


def normalize_text(text: str) -> str:
    """Control characters removed, symbols read, then the spoken form (numbers, dates, times, currency)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    text = spoken_form(text)
    for symbol, spoken in _SYMBOLS.items():
        text = text.replace(symbol, spoken)
    text = _WS.sub(" ", text).strip()
    return re.sub(r" ([,.;:!?])", r"\1", text)


@dataclass(frozen=True)
class ByteTokenizer:
    """UTF-8 bytes shifted past ``PAD``, ``BOS``, ``EOS`` (and any extra specials).

    Deterministic and file-free; ``decode(encode(s)) == s`` for every string.
    """

    num_special: int = 3
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2

    @property
    def vocab_size(self) -> int:
        return 256 + self.num_special

    def encode(self, text: str, *, add_special: bool = True) -> list[int]:
        ids = [b + self.num_special for b in text.encode("utf-8")]
        return [self.bos_id, *ids, self.eos_id] if add_special else ids

    def decode(self, ids: list[int]) -> str:
        data = bytes(i - self.num_special for i in ids if i >= self.num_special)
        return data.decode("utf-8", errors="replace")


def prepare_text(text: str, *, max_chars: int) -> str:
    """Normalise request text and enforce the model's input limit, with a user-facing error."""
    normalized = normalize_text(text)
    if not normalized:
        raise InvalidRequest("input is empty after normalisation (nothing to speak); send at least one speakable character", param="input")
    size = len(normalized.encode("utf-8"))  # what the byte tokenizer turns into positions
    if size > max_chars:
        raise InvalidRequest(param="input", message=
            f"input is {size} UTF-8 bytes after normalisation; this model accepts at most "
            f"{max_chars}; split the input into shorter requests"
        )
    return normalized
