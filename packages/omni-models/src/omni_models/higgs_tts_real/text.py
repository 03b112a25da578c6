"""The Higgs-TTS text prompt, tokenised with the checkpoint's ``tokenizer.json`` (the
``tokenizers`` library, no transformers needed).

Voice cloning: ``<|tts|> [<|ref_text|> ref_text] <|ref_audio|>`` + reference rows + ``<|text|>
text <|audio|>`` (``<|ref_text|>`` only when the request has a transcript and the tokenizer knows
the token); zero-shot: ``<|tts|> <|text|> text <|audio|>``.
"""

from __future__ import annotations

from pathlib import Path

from omni_models.common.weights import CheckpointError


class HiggsTokenizer:
    def __init__(self, path: str | Path):
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise CheckpointError("the real Higgs-TTS pipeline needs the tokenizers library\n  fix: pip install 'omni-models[higgs]'") from exc
        self.tokenizer = Tokenizer.from_file(str(path))
        ids = {name: self.tokenizer.token_to_id(name) for name in ("<|tts|>", "<|ref_audio|>", "<|text|>", "<|audio|>", "<|ref_text|>")}
        missing = [name for name, i in ids.items() if i is None and name != "<|ref_text|>"]
        if missing:
            raise CheckpointError(f"{path}: added_tokens lacks {', '.join(missing)}\n  fix: use the tokenizer.json published with the checkpoint")
        self.tts, self.ref_audio, self.text, self.audio, self.ref_text = (ids[k] for k in ("<|tts|>", "<|ref_audio|>", "<|text|>", "<|audio|>", "<|ref_text|>"))

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def prompt_parts(self, text: str, ref_text: str | None) -> tuple[list[int], list[int]]:
        """``(prefix, suffix)`` around the reference rows of a voice-cloning prompt."""
        prefix = [self.tts]
        if ref_text and self.ref_text is not None:
            prefix += [self.ref_text, *self.encode(ref_text)]
        prefix.append(self.ref_audio)
        return prefix, [self.text, *self.encode(text), self.audio]

    def zero_shot(self, text: str) -> list[int]:
        return [self.tts, self.text, *self.encode(text), self.audio]
