"""``omni synthesize`` flags for the speech request's extension fields (the OpenAI body
extensions omni serve accepts, vLLM-Omni's names): only the flags given enter the request, so a
pipeline sees exactly what an HTTP client would have sent; each pipeline checks them itself."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

FLAGS: tuple[tuple[str, type, str], ...] = (
    ("instructions", str, "style or voice description (Qwen3-TTS CustomVoice 1.7B, VoiceDesign)"),
    ("language", str, "language of the text: auto or one the checkpoint lists"),
    ("ref_text", str, "transcript of --ref-audio (voice cloning in context)"),
    ("temperature", float, "sampling temperature; 0 is greedy"),
    ("top_k", int, "top-k sampling"),
    ("top_p", float, "top-p sampling"),
    ("repetition_penalty", float, "repetition penalty"),
    ("max_new_tokens", int, "most audio frames to generate"),
    ("seed", int, "sampling seed (the same seed gives the same audio)"),
)


def add_request_flags(parser: argparse.ArgumentParser) -> None:
    for name, kind, text in FLAGS:
        parser.add_argument("--" + name.replace("_", "-"), dest=f"field_{name}", type=kind, default=None, help=text)
    parser.add_argument("--ref-audio", dest="field_ref_audio", metavar="WAV", default=None, help="reference recording to clone the voice of (PCM WAV)")
    parser.add_argument("--x-vector-only-mode", dest="field_x_vector_only_mode", action="store_true", default=None,
                        help="clone from the speaker embedding alone (no --ref-text)")


def request_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The given flags as request fields; ``--ref-audio`` is read as WAV bytes (what the HTTP server passes on)."""
    fields = {key[len("field_") :]: value for key, value in vars(args).items() if key.startswith("field_") and value is not None}
    if "ref_audio" in fields:
        path = Path(fields["ref_audio"])
        if not path.is_file():
            from .selection import UserError

            raise UserError(f"error: --ref-audio {path}\n  rule: the reference recording must be a readable WAV file\n  fix:  pass the path of a WAV file")
        fields["ref_audio"] = path.read_bytes()
    return fields
