"""Model names -> pipeline files, through the ``omni.models`` entry-point group.

omni-config never imports omni-models (it may not even be installed in CI): an
entry point ``"bosonai/higgs-tts-3-4b" = "omni_models.higgs_tts:pipeline"`` is
resolved by locating the package directory and reading ``pipeline.yaml`` from it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ENTRY_POINT_GROUP = "omni.models"


def entry_points(group: str):
    """Imported lazily: importlib.metadata costs ~50 ms, and a CLI given a file path never needs it."""
    from importlib.metadata import entry_points as _entry_points

    return _entry_points(group=group)
_registered: dict[str, Path] = {}


def register_model(name: str, pipeline_file: str | Path) -> None:
    """Register a model name in this process (tests, embedding applications)."""
    _registered[name] = Path(pipeline_file)


def registered_models() -> dict[str, str]:
    """Model name -> entry-point value or file, without importing anything."""
    names = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    names.update({name: str(path) for name, path in _registered.items()})
    return dict(sorted(names.items()))


def resolve_model(name: str) -> Path | None:
    """The pipeline file of a registered model name, or None if the name is not registered."""
    if name in _registered:
        return _registered[name]
    entries = list(entry_points(group=ENTRY_POINT_GROUP))
    for ep in entries:
        if ep.name == name:
            return _entry_point_file(ep.value)
    for ep in entries:  # published ids are mixed case (Qwen/Qwen3-TTS-12Hz-1.7B-Base); entry names are lower case
        if ep.name == name.lower():
            return _entry_point_file(ep.value)
    return None


def _entry_point_file(value: str) -> Path | None:
    module, _, variant = value.partition(":")
    variant = variant.strip() or "pipeline"
    try:
        spec = importlib.util.find_spec(module.strip())
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / f"{variant}.yaml"
