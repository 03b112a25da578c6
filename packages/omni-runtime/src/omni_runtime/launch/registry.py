"""Backends by the name an operator gives (``--backend NAME``), imported only when chosen.

The one place that maps a name to a backend's module (and reads the config's
per-backend placement fields): the parent's code
depends on the :class:`~.backend.Backend` interface alone, and a backend's
own dependencies (a cluster client) load only in runs that use it.
"""

from __future__ import annotations

import importlib
from typing import Any

from .backend import Backend

BUILTIN: dict[str, str] = {
    "local": "omni_runtime.launch.local:LocalBackend",
    "ray": "omni_runtime.raycluster.backend:ClusterBackend",
}
"""Backend name -> ``module:class``; the class takes the backend's keyword options."""


def backend_names() -> tuple[str, ...]:
    return tuple(BUILTIN)


def backend_named(name: str, **options: Any) -> Backend:
    """A new backend ``name`` built with ``options``; ValueError naming the known ones otherwise."""
    target = BUILTIN.get(name)
    if target is None:
        raise ValueError(f"backend must be one of {', '.join(BUILTIN)}, got {name!r}")
    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    return cls(**options)


def placement_notes(chosen: str, topology: Any) -> list[str]:
    """Lines for the operator when the config places processes for a backend other than ``chosen``."""
    if chosen == "ray":
        return []
    ignored = sorted({p.declared_process for p in topology.processes if p.ray})
    if not ignored:
        return []
    return [f"omni: processes.<P>.ray of {', '.join(ignored)} is ignored by the {chosen} backend (it places on Ray with --backend ray)"]
