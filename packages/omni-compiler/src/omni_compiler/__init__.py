"""omni-compiler: config -> verified, frozen process topology.

Imports only omni-config (pydantic + PyYAML): installable alone in CI.
"""

from . import render
from .compiler import compile, compile_file
from .errors import TopologyError
from .topology import (
    CompiledEdge,
    CompiledProcess,
    CompiledStage,
    CompiledTopology,
    GpuBudget,
    GpuShare,
    ProcessInstance,
    StagePlacement,
)

__version__ = "0.1.0"

__all__ = [
    "CompiledEdge",
    "CompiledProcess",
    "CompiledStage",
    "CompiledTopology",
    "GpuBudget",
    "GpuShare",
    "ProcessInstance",
    "StagePlacement",
    "TopologyError",
    "compile",
    "compile_file",
    "render",
]
