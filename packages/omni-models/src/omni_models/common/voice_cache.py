"""Speaker artefacts of cloned voices, computed once per (decoded audio, model) and reused.

The server keys a reference recording by the sha256 of its decoded PCM and the served
model (``voice_key``) and names the directory that holds the artefacts (``voices_dir``);
both are payload fields only the server sets (clients cannot send them). A stage that
turns a recording into speaker artefacts calls :func:`reference_artefacts` (or
:func:`reference_speaker` for a lone embedding) instead of its encoder: the artefacts
come from this process's byte-bounded LRU, else from
``<voices_dir>/<voice_key>.safetensors``, else the encoder computes them and they are
written there atomically (temp file + rename), so a restart or another worker reuses
them. Because the key is the content, a voice name reused for other audio can never
reach the old speaker's artefacts.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from omni_runtime.errors import InvalidRequest

VOICE_KEY = "voice_key"
VOICES_DIR = "voices_dir"
SPEAKER = "speaker"
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
"""Bytes of artefacts one process keeps in memory (``OMNI_VOICE_CACHE_BYTES`` overrides)."""
_KEY = re.compile(r"[0-9a-f]{64}")


class ArtefactCache:
    """A least-recently-used map ``voice_key -> {name: tensor}`` bounded by the tensors' bytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, dict[str, torch.Tensor]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get(self, key: str) -> dict[str, torch.Tensor] | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: str, artefacts: dict[str, torch.Tensor]) -> None:
        size = _nbytes(artefacts)
        with self._lock:
            if key in self._items:
                self._bytes -= _nbytes(self._items.pop(key))
            if size > self.max_bytes:
                return  # larger than the whole cache: served, never kept
            self._items[key] = artefacts
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= _nbytes(evicted)


def _nbytes(artefacts: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in artefacts.values())


_CACHE = ArtefactCache(int(os.environ.get("OMNI_VOICE_CACHE_BYTES", DEFAULT_CACHE_BYTES)))


def artefact_path(voices_dir: str, key: str) -> Path:
    return Path(voices_dir) / f"{key}.safetensors"


def cached_artefacts(data: dict[str, Any], compute: Callable[[], dict[str, torch.Tensor]] | None) -> dict[str, torch.Tensor]:
    """The artefacts of ``data[voice_key]``: memory, then disk, then ``compute()`` (saved to disk)."""
    key, voices_dir = data.get(VOICE_KEY), data.get(VOICES_DIR)
    if not isinstance(key, str) or not _KEY.fullmatch(key) or not isinstance(voices_dir, str):
        raise ValueError(f"{VOICE_KEY} must be a sha256 hex digest and {VOICES_DIR} a directory (set by the server), got {key!r}, {voices_dir!r}")
    path = artefact_path(voices_dir, key)
    found = _CACHE.get(key)
    if found is None and path.is_file():
        found = load_file(str(path))
        _CACHE.put(key, found)
    if found is not None:
        if compute is not None and not path.is_file():
            _save(path, found)  # the server asked for the artefacts again: they were deleted on disk
        return found
    if compute is None:
        raise InvalidRequest(f"the speaker artefacts of voice {key[:12]} are gone (deleted); upload the voice again", param="voice")
    computed = {name: tensor.detach().to("cpu").contiguous() for name, tensor in compute().items()}
    _save(path, computed)
    _CACHE.put(key, computed)
    return computed


def voice_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The server's ``voice_key`` / ``voices_dir`` of a request, for a stage to pass on to the encoder stage after it."""
    return {name: data[name] for name in (VOICE_KEY, VOICES_DIR) if name in data}


Artefacts = dict[str, torch.Tensor]


def reference_artefacts(
    data: dict[str, Any],
    ref: torch.Tensor | None,
    encode: Callable[[torch.Tensor], Artefacts],
    preset: Callable[[], Artefacts],
) -> Artefacts:
    """What a model derives from a reference recording (speaker embedding, prompt codes, ...), by name.

    Without ``voice_key`` (a request the server did not key, or a direct ``Runtime.submit``)
    this is ``preset()`` or ``encode(ref)`` as before. With it, the artefacts come from the
    cache (memory, then ``--voices-dir``) and ``encode`` runs only when neither has them; the
    result is on the CPU (callers move it where they need it) and shared by every request of
    that voice, so callers must not modify it in place.
    """
    if VOICE_KEY not in data:
        return preset() if ref is None else encode(ref)
    return cached_artefacts(data, None if ref is None else (lambda: encode(ref)))


def reference_speaker(
    data: dict[str, Any],
    ref: torch.Tensor | None,
    encode: Callable[[torch.Tensor], torch.Tensor],
    preset: Callable[[], torch.Tensor],
    device: Any = "cpu",
) -> torch.Tensor:
    """The speaker embedding: a preset voice, the encoder's embedding of ``ref``, or the cached one for ``voice_key``."""
    found = reference_artefacts(data, ref, lambda r: {SPEAKER: encode(r)}, lambda: {SPEAKER: preset()})
    return found[SPEAKER].to(device)


def _save(path: Path, artefacts: dict[str, torch.Tensor]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".safetensors")
    os.close(fd)
    try:
        save_file(artefacts, tmp, metadata={"format": "omni-voice-artefacts"})
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
