"""The published Higgs-TTS checkpoint, found and verified before any process starts (the
``omni.checkpoints`` entry point of ``bosonai/higgs-tts-3-4b-hf``, and of the spec's id
``bosonai/higgs-tts-3-4b`` when ``--weights`` holds the published layout:
:mod:`omni_models.common.published`)."""

from __future__ import annotations

from pathlib import Path

from .checkpoint import HiggsCheckpoint
from .hf_cache import cached_snapshot


def resolve_published(model_id: str, weights: str | None) -> str:
    """``--weights DIR``, else the snapshot in the local Hugging Face cache, checked file by file
    and key by key (every problem in one error naming the file, the key and the fix)."""
    directory = Path(weights) if weights is not None else cached_snapshot()
    HiggsCheckpoint.open(directory)
    return str(directory.resolve())
