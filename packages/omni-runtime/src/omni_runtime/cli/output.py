"""Where ``omni synthesize`` writes its audio: the format ``-o`` names, stdout kept clean, files atomic.

A file is what its suffix says or nothing is written (never WAV bytes in ``out.mp3``); ``-o -``
keeps the real stdout for the audio; a file appears whole or not at all.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .selection import UserError

#: Output suffix -> the format it names (OpenAI's response formats, plus .raw and .ogg).
SUFFIX_FORMATS = {".wav": "wav", ".flac": "flac", ".pcm": "pcm", ".raw": "pcm", ".mp3": "mp3", ".opus": "opus", ".ogg": "opus", ".aac": "aac"}


def output_format(output: str, requested: str | None) -> str:
    """The format ``-o`` names by its suffix (or ``--format``), refused unless this build encodes it.

    Never writes one format under another format's name (WAV bytes in ``out.mp3``).
    """
    from ..serving.audio import AUDIO_FORMATS

    suffix = "" if output == "-" else Path(output).suffix.lower()
    named = SUFFIX_FORMATS.get(suffix)
    if suffix and named is None and requested is None:
        known = ", ".join(SUFFIX_FORMATS)
        raise UserError(f"error: -o {output}\n  rule: the suffix {suffix!r} names no audio format (known: {known})\n  fix:  -o out.wav, or pass --format")
    if requested is not None and named is not None and requested != named:
        raise UserError(
            f"error: -o {output} --format {requested}\n  rule: the suffix {suffix!r} says {named}, --format says {requested}\n"
            f"  fix:  -o {Path(output).with_suffix('.' + requested)}, or drop --format"
        )
    fmt = requested or named or "wav"
    if fmt not in AUDIO_FORMATS:
        raise UserError(
            f"error: -o {output}\n  rule: this omni-runtime cannot encode {fmt} (it encodes: {', '.join(AUDIO_FORMATS)})\n"
            f"  fix:  -o {Path(output).with_suffix('.wav') if output != '-' else '- --format wav'}"
        )
    return fmt


@contextlib.contextmanager
def stdout_reserved() -> Iterator[Any]:
    """Keep the real stdout for audio bytes (``-o -``); everything else printing there goes to stderr.

    Stage processes inherit file descriptor 1, so a stray ``print`` in model
    code would otherwise corrupt the audio piped into another program.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with os.fdopen(os.dup(saved), "wb") as audio_out:
            yield audio_out
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def write_atomic(path: Path, payload: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(payload)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"error: cannot write {path}: {exc.strerror}\n  fix:  choose a writable output path") from None
