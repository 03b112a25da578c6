"""Validate a raw config with pydantic-core into :mod:`omni_config.records`.

The same core schema pydantic builds for :class:`omni_config.schema.PipelineConfig`
(generated into :mod:`omni_config._core_schema`), run by the same engine, so the
errors are identical: only the model classes are left out.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic_core import SchemaError, SchemaValidator

from . import records


@lru_cache(maxsize=1)
def _validator() -> SchemaValidator:
    from ._core_schema import CORE_SCHEMA

    try:
        return SchemaValidator(CORE_SCHEMA)
    except (SchemaError, TypeError, KeyError, ValueError):
        # Generated with another pydantic-core (constraints.txt pins the one CI uses):
        # derive it from the models instead. Slower to start, same result.
        from .snapshot import live_core_schema

        return SchemaValidator(live_core_schema())


def validate_records(raw: Any) -> records.PipelineConfig:
    """Raises ``pydantic_core.ValidationError`` (the same class as ``pydantic.ValidationError``)."""
    return _validator().validate_python(raw)
