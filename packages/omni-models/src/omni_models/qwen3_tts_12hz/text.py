"""The checkpoint's text tokenizer (Qwen2 byte-level BPE) through the ``tokenizers`` library.

``tokenizer.json`` when the checkpoint has one; otherwise built from ``vocab.json`` +
``merges.txt`` with the Qwen2 pre-tokenizer and the added tokens of ``tokenizer_config.json``
(the published Qwen3-TTS layout), each added token checked to land on its declared id.
"""

from __future__ import annotations

import json
from pathlib import Path

from .spec import CheckpointError, read_json

#: The Qwen2 pre-tokenizer split (contractions, letters, single digits, punctuation runs, newlines, spaces).
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json")


def assistant_text(text: str) -> str:
    return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"


def reference_text(text: str) -> str:
    return f"<|im_start|>assistant\n{text}<|im_end|>\n"


def instruct_text(text: str) -> str:
    return f"<|im_start|>user\n{text}<|im_end|>\n"


class TextTokenizer:
    def __init__(self, directory: Path):
        from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

        single = directory / "tokenizer.json"
        if single.is_file():
            self.tokenizer = Tokenizer.from_file(str(single))
            return
        for name in TOKENIZER_FILES:
            if not (directory / name).is_file():
                raise CheckpointError(f"{directory / name}: missing (the text tokenizer)\n  fix:  copy {name} from the published checkpoint into {directory}")
        tok = Tokenizer(models.BPE.from_file(str(directory / "vocab.json"), str(directory / "merges.txt")))
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
        tok.decoder = decoders.ByteLevel()
        config = read_json(directory, "tokenizer_config.json")
        added = config.get("added_tokens_decoder") or {}
        for key in sorted(added, key=int):
            entry = added[key]
            token = AddedToken(entry["content"], special=bool(entry.get("special", True)), normalized=bool(entry.get("normalized", False)),
                               lstrip=bool(entry.get("lstrip", False)), rstrip=bool(entry.get("rstrip", False)), single_word=bool(entry.get("single_word", False)))
            tok.add_special_tokens([token]) if token.special else tok.add_tokens([token])
            got = tok.token_to_id(entry["content"])
            if got != int(key):
                raise CheckpointError(
                    f"{directory / 'tokenizer_config.json'}: key added_tokens_decoder.{key} ({entry['content']!r}) lands on id {got} after vocab.json\n"
                    "  fix:  use the vocab.json and tokenizer_config.json of the same checkpoint"
                )
        self.tokenizer = tok

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)


def vocab_size(directory: Path) -> int:
    return len(json.loads((directory / "vocab.json").read_text(encoding="utf-8")))
