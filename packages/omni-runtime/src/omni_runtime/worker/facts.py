"""What a worker tells the parent about its stages when it reports ready.

The parent never imports a stage module (that would load the model's code,
and torch, into the server process), so what only the stage modules know
comes back with the ``ready`` message: today the preset voices a model lists
as ``VOICES`` in the module of a stage's factory (``GET /v1/audio/voices``,
the page's voice picker).
"""

from __future__ import annotations

import sys
from typing import Any

from omni_compiler.topology import CompiledTopology, ProcessInstance


def stage_facts(topology: CompiledTopology, instance: ProcessInstance) -> dict[str, Any]:
    """``{"voices": {stage: [names]}}`` for this instance's stages whose factory module lists ``VOICES``."""
    voices: dict[str, list[str]] = {}
    for placement in instance.stages:
        module = sys.modules.get(topology.stage(placement.stage).factory.partition(":")[0])  # imported by the build
        listed = getattr(module, "VOICES", None)
        if isinstance(listed, (list, tuple, dict)) and all(isinstance(v, str) for v in listed):
            voices[placement.stage] = list(listed)
    return {"voices": voices}


def append_facts(adapters: dict[str, Any]) -> dict[str, Any]:
    """``{"append": [stages]}``: this instance's stages whose stage object has a callable ``append``
    hook (input appended to a running request; ``Runtime.supports_append``)."""
    return {"append": sorted(name for name, adapter in adapters.items() if callable(getattr(adapter.obj, "append", None)))}
