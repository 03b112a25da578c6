"""What the server knows about its pipeline's build (``omni_build_info``).

The preset voices are not read here: a model lists them as ``VOICES`` in the
module of a stage's factory, and only the workers import stage modules; they
report the list when ready (``Runtime.voices()``; ``GET /v1/audio/voices`` and
the page's voice picker show it). A pipeline that declares none serves an empty
list (its stages still decide which voices they accept, and answer 400 for an
unknown one).
"""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

_PACKAGES = ("omni-runtime", "omni-compiler", "omni-config", "omni-models", "torch")


def served_voices(runtime: Any, settings: Any) -> tuple[str, ...]:
    """The voices to list: the settings' own, else what the runtime's workers reported at ready."""
    if settings.voices:
        return tuple(settings.voices)
    reported = getattr(runtime, "voices", None)
    return tuple(reported()) if callable(reported) else ()


def build_info(topology: Any) -> dict[str, str]:
    """Labels of ``omni_build_info``: package versions, Python, the served pipeline's name."""
    info = {"python": platform.python_version(), "pipeline": str(topology.name or "")}
    for package in _PACKAGES:
        try:
            info[package.replace("-", "_")] = metadata.version(package)
        except metadata.PackageNotFoundError:
            info[package.replace("-", "_")] = ""
    return info
