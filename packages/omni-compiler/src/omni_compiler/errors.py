"""The compiler's error: the same shape as a config error, so CLIs treat both alike."""

from __future__ import annotations

from omni_config import ConfigError


class TopologyError(ConfigError):
    """The config is well-formed but its topology breaks a rule of the spec."""
