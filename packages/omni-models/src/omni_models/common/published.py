"""Model ids whose registered pipeline runs seeded random weights of the real shape, and that run
the real pipeline when ``--weights`` holds the published checkpoint (``omni.checkpoints`` entry
points; see :mod:`omni_runtime.cli.checkpoints`).

``bosonai/higgs-tts-3-4b`` (the spec's default example) and ``qwen/qwen3-tts`` keep their random
weights without ``--weights`` and with a directory in omni's own export layout
(``python -m omni_models.export``: one ``model.safetensors`` of ``<component>.``-prefixed
tensors, no ``config.json``), which the topology tests and benchmarks rely on. A directory in the
published Hugging Face layout is verified in full by the real model's resolver and served by its
pipeline under the id the user gave.

Light on purpose: the parent imports this for every command naming these ids, so the real
model's checker (and torch) is imported only when a published checkpoint is given.
"""

from __future__ import annotations

import importlib
import json
import struct
from pathlib import Path

from omni_runtime.cli.checkpoints import Checkpoint

SAFETENSORS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
MAX_HEADER_BYTES = 100 * 1024 * 1024  # safetensors' own bound on the JSON header


def higgs_tts(model_id: str, weights: str | None) -> Checkpoint | None:
    """``bosonai/higgs-tts-3-4b``: published tensors are named ``body.*`` / ``tied.*``."""
    return _published_or_random(model_id, weights, "bosonai/higgs-tts-3-4b-hf", "omni_models.higgs_tts_real.resolve:resolve_published", ("body.", "tied."))


def qwen3_tts(model_id: str, weights: str | None) -> Checkpoint | None:
    """``qwen/qwen3-tts``: the 12 Hz pipeline (one pipeline file for every variant; the checkpoint's
    ``config.json`` names its variant). The published tensor names share omni's ``talker.`` prefix,
    so only ``config.json`` or the shard index mark the published layout."""
    return _published_or_random(model_id, weights, "qwen/qwen3-tts-12hz-1.7b-base", "omni_models.qwen3_tts_12hz.checkpoint:resolve", ())


def _published_or_random(model_id: str, weights: str | None, pipeline: str, resolver: str, prefixes: tuple[str, ...]) -> Checkpoint | None:
    if weights is None or not is_published_layout(Path(weights), prefixes):
        return None
    module, _, name = resolver.partition(":")
    return Checkpoint(getattr(importlib.import_module(module), name)(model_id, weights), pipeline=pipeline)


def is_published_layout(directory: Path, tensor_prefixes: tuple[str, ...] = ()) -> bool:
    """``config.json``, a shard index, or (when the published names differ from omni's export)
    a tensor named with one of ``tensor_prefixes``: the published layout, to be checked in full."""
    if (directory / "config.json").is_file() or (directory / INDEX_FILE).is_file():
        return True
    single = directory / SAFETENSORS_FILE
    return bool(tensor_prefixes) and single.is_file() and any(name.startswith(tensor_prefixes) for name in safetensors_names(single))


def safetensors_names(path: Path) -> list[str]:
    """The tensor names in a safetensors file's header (no tensor is read); none when unreadable,
    which leaves the file to the loader that reports it with its fix."""
    try:
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > MAX_HEADER_BYTES:
                return []
            header = json.loads(handle.read(length))
    except (OSError, struct.error, ValueError):
        return []
    return [name for name in header if name != "__metadata__"] if isinstance(header, dict) else []
