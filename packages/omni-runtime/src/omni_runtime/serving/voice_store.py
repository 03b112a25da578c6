"""Uploaded voices on disk: decoded reference audio, its content key, and an index that survives restarts.

A voice is identified to clients by an id (``voice_<random>``) and a name (unique per
model); the speaker artefacts behind it are identified by their *content*: the sha256
of the decoded 16-bit PCM (with its rate and channel count) and the served model. Two
uploads of the same recording share one key and so one set of artefacts; a name that is
deleted and reused for another recording gets a new key, so it never reaches the old
speaker. The parent keeps only this index and the decoded audio needed to compute the
artefacts once; the artefacts themselves are computed and read by the model's stage
(``<voices_dir>/<key>.safetensors``). Every file is written atomically (temp + rename).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import APIError, bad_request

DEFAULT_MAX_UPLOAD_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_VOICE_SECONDS = 30.0
MIN_VOICE_SECONDS = 0.5
MAX_NAME_CHARS = 64
MAX_REF_TEXT_CHARS = 1000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ -]{0,63}")
_INDEX = "voices.json"


@dataclass(frozen=True)
class DecodedAudio:
    """Reference audio as the model receives it: float32 ``[channels, samples]`` in [-1, 1]."""

    samples: np.ndarray
    sample_rate: int

    @property
    def seconds(self) -> float:
        return self.samples.shape[1] / self.sample_rate

    def content_key(self, model: str) -> str:
        """sha256 of the 16-bit PCM, its rate and channels, and the model: the artefacts' identity."""
        pcm = np.rint(np.clip(self.samples, -1.0, 1.0) * 32767.0).astype("<i2")
        digest = hashlib.sha256()
        digest.update(f"{model}\0{self.sample_rate}\0{pcm.shape[0]}\0".encode())
        digest.update(np.ascontiguousarray(pcm.T).tobytes())
        return digest.hexdigest()


@dataclass(frozen=True)
class VoiceRecord:
    id: str
    name: str
    model: str
    key: str
    ref_text: str
    seconds: float
    sample_rate: int
    created: int

    def card(self) -> dict[str, Any]:
        """What ``GET /v1/audio/voices/{id}`` answers."""
        return {
            "id": self.id, "object": "audio.voice", "name": self.name, "model": self.model, "type": "audio_sample",
            "sha256": self.key, "ref_text": self.ref_text, "duration_seconds": round(self.seconds, 3),
            "sample_rate": self.sample_rate, "created_at": self.created,
        }


def decode_audio(data: bytes, max_seconds: float, param: str = "file") -> DecodedAudio:
    """Any container and codec PyAV (ffmpeg) reads, to float32 PCM at the file's own rate; bounded in duration."""
    import av

    if not data:
        raise bad_request(f"{param} is empty; send an audio file", param=param, code="invalid_audio")
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                raise bad_request(f"{param} holds no audio stream", param=param, code="invalid_audio")
            stream = container.streams.audio[0]
            channels = min(2, stream.codec_context.channels or 1)
            resampler = av.AudioResampler(format="flt", layout="mono" if channels == 1 else "stereo", rate=stream.codec_context.sample_rate)
            parts: list[np.ndarray] = []
            frames = 0
            limit = int(max_seconds * (stream.codec_context.sample_rate or 48000)) + 1
            for frame in container.decode(stream):
                for converted in resampler.resample(frame):
                    array = converted.to_ndarray().reshape(-1, channels).T
                    parts.append(array)
                    frames += array.shape[1]
                if frames > limit:
                    raise APIError(413, f"{param} is longer than {max_seconds:g} s; send a shorter reference recording",
                                   param=param, code="audio_too_long")
            rate = int(stream.codec_context.sample_rate)
    except APIError:
        raise
    except (av.error.FFmpegError, ValueError, IndexError) as exc:
        raise bad_request(f"{param} is not an audio file ffmpeg can decode ({exc}); send WAV, FLAC, MP3, Ogg/Opus, AAC or M4A",
                          param=param, code="invalid_audio") from None
    if not parts or frames == 0:
        raise bad_request(f"{param} decodes to no samples; send a recording of speech", param=param, code="invalid_audio")
    samples = np.concatenate(parts, axis=1).astype(np.float32, copy=False)
    audio = DecodedAudio(np.ascontiguousarray(samples), rate)
    if audio.seconds < MIN_VOICE_SECONDS:
        raise bad_request(f"{param} is {audio.seconds:.2f} s long; send at least {MIN_VOICE_SECONDS:g} s of speech", param=param, code="audio_too_short")
    if not np.all(np.isfinite(samples)):
        raise bad_request(f"{param} holds NaN or infinite samples", param=param, code="invalid_audio")
    return audio


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name or ""):
        raise bad_request(
            f"name {name[:80]!r} is not a valid voice name: 1 to {MAX_NAME_CHARS} characters, letters, digits, '.', '_', '-' or spaces, "
            "starting with a letter or digit", param="name", code="invalid_value",
        )
    return name


class VoiceStore:
    """The index of uploaded voices in ``root/voices.json``; artefacts live beside it as ``<key>.safetensors``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._voices: dict[str, VoiceRecord] = self._load()

    def _load(self) -> dict[str, VoiceRecord]:
        path = self.root / _INDEX
        if not path.is_file():
            return {}
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))
            return {row["id"]: VoiceRecord(**row) for row in rows}
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{path}: not a voice index written by omni ({exc}); move it away or pass another --voices-dir") from None

    def _save(self) -> None:
        rows = [asdict(v) for v in self._voices.values()]
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=1)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.root / _INDEX)

    def artefact_path(self, key: str) -> Path:
        return self.root / f"{key}.safetensors"

    def has_artefacts(self, key: str) -> bool:
        return self.artefact_path(key).is_file()

    def list(self, model: str | None = None) -> list[VoiceRecord]:
        return sorted((v for v in self._voices.values() if model is None or v.model == model), key=lambda v: (v.created, v.name))

    def get(self, voice_id: str) -> VoiceRecord | None:
        return self._voices.get(voice_id)

    def find(self, model: str, name_or_id: str) -> VoiceRecord | None:
        found = self._voices.get(name_or_id)
        if found is not None and found.model == model:
            return found
        return next((v for v in self._voices.values() if v.model == model and v.name == name_or_id), None)

    def add(self, name: str, model: str, key: str, ref_text: str, audio: DecodedAudio) -> VoiceRecord:
        with self._lock:
            if any(v.model == model and v.name == name for v in self._voices.values()):
                raise APIError(409, f"model {model!r} already has a voice named {name!r}; delete it first or pick another name",
                               param="name", code="voice_exists")
            record = VoiceRecord(f"voice_{secrets.token_hex(8)}", name, model, key, ref_text, audio.seconds, audio.sample_rate, int(time.time()))
            self._voices[record.id] = record
            self._save()
            return record

    def delete(self, voice_id: str) -> VoiceRecord | None:
        """Remove the voice; its artefacts go too unless another voice has the same content."""
        with self._lock:
            record = self._voices.pop(voice_id, None)
            if record is None:
                return None
            self._save()
            if not any(v.key == record.key for v in self._voices.values()):
                self.artefact_path(record.key).unlink(missing_ok=True)
            return record
