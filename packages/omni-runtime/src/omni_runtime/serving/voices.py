"""What the server learns about its pipeline before it starts: the preset voices and its build.

A model lists its preset voices as ``VOICES`` (a sequence of names) in the module of
its entry stage's factory; ``GET /v1/audio/voices`` and the page's voice picker show
them. A pipeline that declares none serves an empty list (its stages still decide
which voices they accept, and answer 400 for an unknown one).
"""

from __future__ import annotations

import importlib
import platform
from importlib import metadata
from typing import Any

_PACKAGES = ("omni-runtime", "omni-compiler", "omni-config", "omni-models", "torch")


def voices_of(topology: Any) -> tuple[str, ...]:
    """``VOICES`` of the entry stage's factory module, else of the first stage module that has one."""
    entry = next((s for s in topology.stages if s.name == topology.entry_stage), None)
    ordered = ([entry] if entry else []) + [s for s in topology.stages if s is not entry]
    for stage in ordered:
        module_name = stage.factory.partition(":")[0]
        try:
            module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001 - a module that fails to import fails the stage's build, reported there
            continue
        voices = getattr(module, "VOICES", None)
        if isinstance(voices, (list, tuple, dict)) and all(isinstance(v, str) for v in voices):
            return tuple(voices)
    return ()


def build_info(topology: Any) -> dict[str, str]:
    """Labels of ``omni_build_info``: package versions, Python, the served pipeline's name."""
    info = {"python": platform.python_version(), "pipeline": str(topology.name or "")}
    for package in _PACKAGES:
        try:
            info[package.replace("-", "_")] = metadata.version(package)
        except metadata.PackageNotFoundError:
            info[package.replace("-", "_")] = ""
    return info
