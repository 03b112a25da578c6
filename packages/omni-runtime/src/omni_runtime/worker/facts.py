"""What a worker tells the parent about its stages when it reports ready.

The parent never imports a stage module (that would load the model's code,
and torch, into the server process), so what only the stage modules know
comes back with the ``ready`` message: the preset voices a model lists as
``VOICES`` in the module of a stage's factory (``GET /v1/audio/voices``, the
page's voice picker), and the request limits it declares as
``REQUEST_LIMITS`` there (:data:`LIMIT_KEYS`), which the parent enforces
before a request reaches a worker (a text over the entry stage's
``max_input_chars`` is refused at once, naming ``input``, the limit and the
fix). A stage object may declare its own ``request_limits`` (a dict of the
same keys, e.g. from its model spec), which wins over its module's.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from omni_compiler.topology import CompiledTopology, ProcessInstance

LIMIT_KEYS = {
    "max_input_chars": "the most characters of the request's text (``input``, as the client sent it) the stage accepts",
    "sample_rate": "the sample rate (Hz) of the audio the stage returns",
}
"""What ``REQUEST_LIMITS`` may say; each value a positive int. Other keys are a mistake in the stage module."""

log = logging.getLogger("omni.worker")


def declared_limits(declared: Any, where: str) -> dict[str, int]:
    """The entries of ``declared`` that follow :data:`LIMIT_KEYS`; each one that does not is logged (naming ``where``)
    and left out: the stage still checks its own requests, the parent only answers early what it knows for sure."""
    if declared is None:
        return {}
    if not isinstance(declared, dict):
        log.error("%s: REQUEST_LIMITS must be a dict of %s, got %s; ignored", where, ", ".join(LIMIT_KEYS), type(declared).__name__)
        return {}
    out = {}
    for key, value in declared.items():
        if key not in LIMIT_KEYS:
            log.error("%s: REQUEST_LIMITS has no key %r (the keys are %s); ignored", where, key, ", ".join(LIMIT_KEYS))
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            log.error("%s: REQUEST_LIMITS[%r] must be a positive int (%s), got %r; ignored", where, key, LIMIT_KEYS[key], value)
        else:
            out[key] = value
    return out


def stage_facts(topology: CompiledTopology, instance: ProcessInstance, stage_objects: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"voices": {stage: [names]}, "limits": {stage: {key: int}}}`` for this instance's stages that declare them.

    ``stage_objects``: the built stage objects by stage name (their ``request_limits`` win over the module's).
    """
    voices: dict[str, list[str]] = {}
    limits: dict[str, dict[str, int]] = {}
    for placement in instance.stages:
        module_name = topology.stage(placement.stage).factory.partition(":")[0]
        module = sys.modules.get(module_name)  # imported by the build
        listed = getattr(module, "VOICES", None)
        if isinstance(listed, (list, tuple, dict)) and all(isinstance(v, str) for v in listed):
            voices[placement.stage] = list(listed)
        declared = declared_limits(getattr(module, "REQUEST_LIMITS", None), module_name)
        own = getattr((stage_objects or {}).get(placement.stage), "request_limits", None)
        declared.update(declared_limits(own, f"stage {placement.stage}") if isinstance(own, dict) else {})
        if declared:
            limits[placement.stage] = declared
    return {"voices": voices, "limits": limits}


def append_facts(adapters: dict[str, Any]) -> dict[str, Any]:
    """``{"append": [stages]}``: this instance's stages whose stage object has a callable ``append``
    hook (input appended to a running request; ``Runtime.supports_append``)."""
    return {"append": sorted(name for name, adapter in adapters.items() if callable(getattr(adapter.obj, "append", None)))}
