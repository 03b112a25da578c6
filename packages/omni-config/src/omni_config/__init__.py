"""omni-config: the pipeline schema, YAML layering and dotted overrides.

Light on purpose (pydantic + PyYAML only): CI installs it, with omni-compiler,
to validate deployment configs without torch.
"""

from .errors import ConfigError, ConfigFileError, ConfigIssue
from .loader import load_config, load_model, raw_config, resolve_model_source
from .overrides import split_overrides
from .registry import ENTRY_POINT_GROUP, register_model, registered_models, resolve_model
from .schema import (
    PipelineConfig,
    PlacementConfig,
    ProcessConfig,
    ProcessLocalEdge,
    ResourcesConfig,
    StageConfig,
    StageRuntimeConfig,
    json_schema,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "ConfigFileError",
    "ConfigIssue",
    "ENTRY_POINT_GROUP",
    "PipelineConfig",
    "PlacementConfig",
    "ProcessConfig",
    "ProcessLocalEdge",
    "ResourcesConfig",
    "StageConfig",
    "StageRuntimeConfig",
    "json_schema",
    "load_config",
    "load_model",
    "raw_config",
    "register_model",
    "registered_models",
    "resolve_model",
    "resolve_model_source",
    "split_overrides",
]
