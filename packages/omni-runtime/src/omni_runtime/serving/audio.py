"""Audio encoding for the HTTP API and the CLI: float tensors in, file bytes out.

Stages hand back float32 audio in [-1, 1] shaped ``[samples]`` or
``[channels, samples]`` (docs/stage-contract.md). Clients want 16-bit PCM in a
container they can play, so this module owns the one conversion (clip, scale,
round, interleave); :mod:`.encoders` turns it into each container through PyAV. Kept free of
FastAPI so ``omni synthesize`` and the server write identical bytes.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from .pcm import AudioError, PcmAudio, wav_header

AUDIO_FORMATS: tuple[str, ...] = ("mp3", "opus", "aac", "flac", "wav", "pcm")
"""OpenAI's response formats; every one can also be streamed (see :mod:`.encoders`)."""

CONTENT_TYPES: dict[str, str] = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}

def to_pcm16(audio: Any, sample_rate: Any) -> PcmAudio:
    """Convert contract audio (torch tensor or numpy array) to interleaved int16.

    Values outside [-1, 1] are clipped rather than wrapped, so an overshooting
    vocoder clicks instead of producing full-scale noise.
    """
    if not isinstance(sample_rate, (int, np.integer)) or isinstance(sample_rate, bool) or int(sample_rate) <= 0:
        raise AudioError(f"sample_rate must be a positive int, got {sample_rate!r}")
    array = _as_float_array(audio)
    if array.ndim == 1:
        array = array[:, None]
    elif array.ndim == 2:
        array = array.T  # [channels, samples] -> [frames, channels]
    else:
        raise AudioError(f"audio must be shaped [samples] or [channels, samples], got shape {tuple(array.shape)}")
    if array.shape[1] == 0:
        raise AudioError("audio has zero channels")
    if not np.all(np.isfinite(array)):
        raise AudioError("audio contains NaN or infinite samples")
    scaled = np.rint(np.clip(array, -1.0, 1.0) * 32767.0).astype(np.int16)
    return PcmAudio(np.ascontiguousarray(scaled), int(sample_rate))


def concat(parts: list[PcmAudio]) -> PcmAudio:
    """Join streamed chunks; they must agree on rate and channel count."""
    if not parts:
        raise AudioError("no audio was produced")
    first = parts[0]
    for part in parts[1:]:
        if part.sample_rate != first.sample_rate or part.channels != first.channels:
            raise AudioError(
                f"audio chunks disagree: {first.sample_rate} Hz x{first.channels} then {part.sample_rate} Hz x{part.channels}"
            )
    return PcmAudio(np.concatenate([p.samples for p in parts], axis=0), first.sample_rate)


def encode(audio: PcmAudio, fmt: str) -> bytes:
    """A complete file in ``fmt`` (one of :data:`AUDIO_FORMATS`)."""
    if fmt == "pcm":
        return audio.to_bytes()
    if fmt == "wav":
        data = audio.to_bytes()
        return wav_header(audio.sample_rate, audio.channels, len(data)) + data
    if fmt in AUDIO_FORMATS:
        from .encoders import encode_file

        return encode_file(audio, fmt)
    raise AudioError(f"unsupported audio format {fmt!r}; supported: {', '.join(AUDIO_FORMATS)}")


def _as_float_array(audio: Any) -> np.ndarray:
    if hasattr(audio, "detach") and hasattr(audio, "cpu"):  # a torch tensor, without importing torch here
        tensor = audio.detach().cpu()
        if tensor.is_floating_point() and str(tensor.dtype) != "torch.float32":
            tensor = tensor.float()  # bfloat16/float16 have no numpy twin
        audio = tensor.numpy()
    if not isinstance(audio, np.ndarray):
        raise AudioError(f"audio must be a tensor or array, got {type(audio).__name__}")
    if not np.issubdtype(audio.dtype, np.floating):
        raise AudioError(f"audio must be floating point in [-1, 1], got dtype {audio.dtype}")
    return audio.astype(np.float32, copy=False)


MAX_REFERENCE_RATE = 384_000
"""Highest sample rate a reference recording may declare (the highest any audio interface records)."""


def wav_problem(data: bytes) -> str | None:
    """Why ``data`` is not a usable PCM WAV recording (a client's ``ref_audio``), or None when it is.

    Checked at the HTTP front end so a malformed upload is a 400 naming the field,
    not a division by a zero sample rate or a short read deep inside a stage.
    """
    import io
    import wave

    if not data:
        return "it is empty"
    try:
        with wave.open(io.BytesIO(data), "rb") as wav:
            rate, channels, width, frames = wav.getframerate(), wav.getnchannels(), wav.getsampwidth(), wav.getnframes()
            body = wav.readframes(frames)
    except (wave.Error, EOFError, struct.error, ValueError) as exc:
        kind = "a truncated WAV file" if data[:4] == b"RIFF" and data[8:12] == b"WAVE" else "not a WAV file"
        return f"it is {kind} ({exc})"
    if not 0 < rate <= MAX_REFERENCE_RATE:
        return f"its header declares a sample rate of {rate} Hz (1 to {MAX_REFERENCE_RATE} Hz)"
    if channels < 1:
        return "its header declares no channels"
    if width not in (2, 4):
        return f"it has {8 * width}-bit samples (16- or 32-bit PCM expected)"
    if frames == 0 or not body:
        return "it holds no audio frames"
    if len(body) != frames * channels * width:
        return f"it is truncated: the header declares {frames} frames, the file holds {len(body) // max(channels * width, 1)}"
    return None
