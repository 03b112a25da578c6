"""Which Higgs-TTS pipeline a command runs, and the published checkpoint verified before any
process starts (the ``omni.checkpoints`` entry points of ``bosonai/higgs-tts-3-4b`` and
``bosonai/higgs-tts-3-4b-hf``, see :mod:`omni_runtime.checkpoints`).

``bosonai/higgs-tts-3-4b`` is the spec's default example id. Without ``--weights`` (and with a
directory in omni's own export layout, ``python -m omni_models.export``) it keeps running seeded
random weights of the real shape, which the topology tests and benchmarks rely on; with a
directory in the published layout it runs this package's real pipeline. ``-hf`` always runs the
real one and finds the checkpoint in the local Hugging Face cache when ``--weights`` is absent.
"""

from __future__ import annotations

from pathlib import Path

from safetensors import SafetensorError, safe_open

from omni_runtime.checkpoints import Checkpoint

from .checkpoint import BODY_PREFIX, INDEX_FILE, HiggsCheckpoint
from .hf_cache import cached_snapshot

REAL_PIPELINE = "bosonai/higgs-tts-3-4b-hf"
PUBLISHED_PREFIXES = (BODY_PREFIX, "tied.")


def resolve_published(model_id: str, weights: str | None) -> str:
    """``--weights DIR`` or the cached snapshot, checked file by file and key by key."""
    directory = Path(weights) if weights is not None else cached_snapshot()
    HiggsCheckpoint.open(directory)
    return str(directory.resolve())


def resolve_default(model_id: str, weights: str | None) -> Checkpoint | None:
    """The real pipeline when ``--weights`` holds the published layout; else the random-weight one."""
    if weights is None or not is_published_layout(Path(weights)):
        return None
    return Checkpoint(resolve_published(model_id, weights), pipeline=REAL_PIPELINE)


def is_published_layout(directory: Path) -> bool:
    """A ``config.json``, a shard index or published tensor names (``body.``, ``tied.``): the
    published layout, checked in full, rather than omni's ``<component>.``-prefixed export."""
    if (directory / "config.json").is_file() or (directory / INDEX_FILE).is_file():
        return True
    single = directory / "model.safetensors"
    if not single.is_file():
        return False
    try:
        with safe_open(str(single), framework="pt") as handle:
            return any(name.startswith(PUBLISHED_PREFIXES) for name in handle.keys())  # noqa: SIM118 - safe_open is not a dict
    except (OSError, SafetensorError):
        return False  # not readable as safetensors: the random-weight loader reports it with its fix
