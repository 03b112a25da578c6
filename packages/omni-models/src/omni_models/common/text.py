"""Text normalisation and a deterministic byte tokenizer.

Real TTS front ends normalise text (numbers, symbols, whitespace) before a subword tokenizer.
The dummy-weight models here need a tokenizer that is deterministic, reversible and has no
vocabulary file, so ids are UTF-8 bytes shifted past a few special tokens.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from omni_runtime.errors import InvalidRequest

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SYMBOLS = {"&": " and ", "%": " percent ", "+": " plus ", "@": " at ", "=": " equals "}
_WS = re.compile(r"\s+")
_NUMBER = re.compile(r"\d+")


def number_to_words(n: int) -> str:
    """Spell a non-negative integer in English words (digit-by-digit beyond a billion)."""
    if n < 0:
        raise ValueError(f"number_to_words expects a non-negative integer, got {n}")
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, rest = divmod(n, 10)
        return _TENS[tens] + ("" if rest == 0 else "-" + _ONES[rest])
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return _ONES[hundreds] + " hundred" + ("" if rest == 0 else " " + number_to_words(rest))
    for scale, word in ((10**9, "billion"), (10**6, "million"), (10**3, "thousand")):
        if n >= scale:
            if n >= 1000 * 10**9:
                return " ".join(_ONES[int(d)] for d in str(n))
            head, rest = divmod(n, scale)
            return number_to_words(head) + " " + word + ("" if rest == 0 else " " + number_to_words(rest))
    raise AssertionError("unreachable")


def normalize_text(text: str) -> str:
    """NFKC, control characters removed, digits spelled out, symbols read, whitespace collapsed."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    for symbol, spoken in _SYMBOLS.items():
        text = text.replace(symbol, spoken)
    text = _NUMBER.sub(lambda m: " " + number_to_words(int(m.group())) + " ", text)
    text = _WS.sub(" ", text).strip()
    text = re.sub(r" ([,.;:!?])", r"\1", text)
    return text


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
