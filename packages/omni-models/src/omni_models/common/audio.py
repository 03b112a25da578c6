"""Reference audio handling and voice presets.

A request may carry a reference recording for voice cloning: ``ref_audio`` as a float tensor
(``[samples]`` or ``[channels, samples]``) with ``ref_sample_rate``, or as WAV bytes. It is
mixed to mono, resampled to the encoder's rate, checked and peak-normalised here, once for
every model.
"""

from __future__ import annotations

import io
import wave
from typing import Any

import torch
import torch.nn.functional as F

from omni_runtime.errors import InvalidRequest

MAX_REFERENCE_SECONDS = 30.0

#: Voice presets every model accepts (the OpenAI speech API names plus ``default``).
VOICES = ("default", "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse")


def voice_index(voice: Any) -> int:
    """Index of a preset voice; ``None`` is ``default``. An unknown name is a user error."""
    if voice is None or voice == "":
        return 0
    if not isinstance(voice, str) or voice.lower() not in VOICES:
        raise InvalidRequest(f"unknown voice {voice!r}; choose one of: {', '.join(VOICES)}, or send ref_audio to clone a voice", param="voice")
    return VOICES.index(voice.lower())


def resample(wave_: torch.Tensor, src_rate: int, dst_rate: int) -> torch.Tensor:
    """Linear-interpolation resampling of ``[channels, samples]`` (adequate for encoder inputs)."""
    if src_rate == dst_rate:
        return wave_
    n = max(1, round(wave_.shape[-1] * dst_rate / src_rate))
    return F.interpolate(wave_[None], size=n, mode="linear", align_corners=False)[0]


def _decode_wav(data: bytes) -> tuple[torch.Tensor, int]:
    try:
        with wave.open(io.BytesIO(data), "rb") as wav:
            rate, channels, width = wav.getframerate(), wav.getnchannels(), wav.getsampwidth()
            frames = wav.readframes(wav.getnframes())
    except (wave.Error, EOFError) as exc:
        raise InvalidRequest(param="ref_audio", message=f"ref_audio bytes are not a readable PCM WAV file ({exc}); send 16- or 32-bit PCM WAV") from exc
    if rate <= 0 or channels < 1:
        raise InvalidRequest(f"ref_audio WAV header declares {rate} Hz and {channels} channel(s); send a real recording", param="ref_audio")
    if not frames or len(frames) % (width * channels):
        raise InvalidRequest("ref_audio WAV is truncated or holds no frames; send the whole file", param="ref_audio")
    dtypes = {2: (torch.int16, 32768.0), 4: (torch.int32, 2147483648.0)}
    if width not in dtypes:
        raise InvalidRequest(f"ref_audio WAV has {8 * width}-bit samples; send 16- or 32-bit PCM WAV", param="ref_audio")
    dtype, scale = dtypes[width]
    samples = torch.frombuffer(bytearray(frames), dtype=dtype).to(torch.float32) / scale
    return samples.view(-1, channels).T.contiguous(), rate


def reference_recording(data: dict[str, Any]) -> tuple[torch.Tensor, int] | None:
    """The request's ``ref_audio`` checked and decoded: float32 ``[channels, samples]`` and its rate,
    or None without one. Every model reads the field through this (how it then mixes, resamples
    and scales is the model's own); a malformed one is an ``InvalidRequest`` naming the field."""
    raw = data.get("ref_audio")
    if raw is None:
        return None
    if isinstance(raw, (bytes, bytearray)):
        audio, rate = _decode_wav(bytes(raw))
    elif isinstance(raw, torch.Tensor):
        rate = data.get("ref_sample_rate")
        if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
            raise InvalidRequest(f"ref_sample_rate must be a positive integer with a tensor ref_audio, got {rate!r}", param="ref_sample_rate")
        audio = raw.detach().to(torch.float32, copy=True).cpu()
        if audio.dim() == 1:
            audio = audio[None]
        if audio.dim() != 2:
            raise InvalidRequest(f"ref_audio must be [samples] or [channels, samples], got shape {tuple(raw.shape)}", param="ref_audio")
    else:
        raise InvalidRequest(f"ref_audio must be a float tensor or WAV bytes, got {type(raw).__name__}", param="ref_audio")
    if audio.shape[-1] == 0:
        raise InvalidRequest("ref_audio is empty; send at least a fraction of a second of speech", param="ref_audio")
    if audio.shape[-1] / rate > MAX_REFERENCE_SECONDS:
        raise InvalidRequest(f"ref_audio is {audio.shape[-1] / rate:.1f} s long; the limit is {MAX_REFERENCE_SECONDS:.0f} s", param="ref_audio")
    if not torch.isfinite(audio).all():
        raise InvalidRequest("ref_audio contains NaN or infinite samples", param="ref_audio")
    return audio, rate


def reference_audio(data: dict[str, Any], target_rate: int) -> torch.Tensor | None:
    """The request's reference recording as mono float32 ``[samples]`` at ``target_rate`` (linear
    resampling), peak-normalised, or None."""
    recording = reference_recording(data)
    if recording is None:
        return None
    audio, rate = recording
    mono = resample(audio.mean(dim=0, keepdim=True), rate, target_rate)[0]
    peak = mono.abs().max()
    return mono * (0.95 / peak) if peak > 0 else mono
