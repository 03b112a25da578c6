"""omni-config: the pipeline schema, YAML layering and dotted overrides.

Light on purpose (pydantic + PyYAML only): CI installs it, with omni-compiler,
to validate deployment configs without torch. The pydantic model classes are
imported on first use (``omni_config.PipelineConfig``), not on import, so a tool
that only reads the registry or the error types (omni-lint) never pays for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import ConfigError, ConfigFileError, ConfigIssue
from .loader import load_config, load_model, raw_config, resolve_model_source
from .overrides import split_overrides
from .registry import ENTRY_POINT_GROUP, register_model, registered_models, resolve_model

if TYPE_CHECKING:
    from .published import json_schema
    from .schema import (
        PipelineConfig,
        PlacementConfig,
        ProcessConfig,
        ProcessLocalEdge,
        ResourcesConfig,
        StageConfig,
        StageRuntimeConfig,
    )

__version__ = "0.1.0"

#: Built on first access (PEP 562): importing them builds the pydantic models.
_FROM_SCHEMA = (
    "PipelineConfig",
    "PlacementConfig",
    "ProcessConfig",
    "ProcessLocalEdge",
    "ResourcesConfig",
    "StageConfig",
    "StageRuntimeConfig",
    "json_schema",
)

__all__ = [  # noqa: RUF022 - grouped: eager names, then the lazily built models
    "ENTRY_POINT_GROUP",
    "ConfigError",
    "ConfigFileError",
    "ConfigIssue",
    "load_config",
    "load_model",
    "raw_config",
    "register_model",
    "registered_models",
    "resolve_model",
    "resolve_model_source",
    "split_overrides",
    *_FROM_SCHEMA,
]


def __getattr__(name: str) -> Any:
    if name in _FROM_SCHEMA:
        from . import published, schema

        value = getattr(published if name == "json_schema" else schema, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'omni_config' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
