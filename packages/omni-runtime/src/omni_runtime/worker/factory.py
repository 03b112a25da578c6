"""Import a dotted path and call a stage factory with signature-based injection.

A factory receives its ``factory_args`` plus only the runtime values its
signature names explicitly. A ``**kwargs`` factory receives none of them: an
author who wants ``device`` says so, and a factory that forwards ``**kwargs``
to a model constructor is never handed surprise keywords.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

INJECTABLE = (
    "gpu_id",
    "device",
    "total_gpu_memory_fraction",
    "process_total_gpu_memory_fraction",
    "stage_name",
    "model_path",
    "tp_rank",
    "tp_size",
    "tp_group",
)


def import_dotted(path: str) -> Any:
    """Resolve ``pkg.mod:attr`` (or ``pkg.mod.attr``); ``attr`` may itself be dotted after ``:``."""
    if ":" in path:
        module_name, _, attr_path = path.partition(":")
    else:
        module_name, _, attr_path = path.rpartition(".")
    if not module_name or not attr_path:
        raise ImportError(f"'{path}' is not a dotted path such as 'pkg.module:function'")
    module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportError(f"module '{module_name}' has no attribute '{attr_path}' (from '{path}')") from None
    return obj


@dataclass(frozen=True)
class Injection:
    """The runtime values a factory may ask for by name."""

    gpu_id: int | None
    device: str
    total_gpu_memory_fraction: float | None
    process_total_gpu_memory_fraction: float | None
    stage_name: str
    model_path: str | None
    tp_rank: int | None
    tp_size: int
    tp_group: Any = None
    """The rank's ``omni_runtime.distributed.TPGroup`` (TP stages; None otherwise)."""

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in INJECTABLE}


def injected_kwargs(factory: Callable[..., Any], injection: Injection, factory_args: dict[str, Any]) -> dict[str, Any]:
    """``factory_args`` plus the injectable values the signature names explicitly.

    ``factory_args`` win over an injected value of the same name (the config
    said so explicitly).
    """
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    explicit = {
        name
        for name, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    kwargs = dict(factory_args)
    for name, value in injection.as_dict().items():
        if name in explicit and name not in kwargs:
            kwargs[name] = value
    return kwargs


def resolve_device(gpu: int | None, device_override: str | None) -> tuple[str, int | None]:
    """The device a stage runs on and the ``gpu_id`` it is told.

    ``device_override="cpu"`` runs GPU-declared stages on the CPU (placement
    accounting is unchanged; ``gpu_id`` is then None because no GPU is used).
    """
    if device_override is not None and device_override != "cpu" and not device_override.startswith("cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or None, got {device_override!r}")
    if gpu is None or device_override == "cpu":
        return "cpu", None
    return f"cuda:{gpu}", gpu
