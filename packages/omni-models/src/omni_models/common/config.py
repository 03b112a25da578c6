"""Base of the per-model config classes: the Python face of a model's contract.

The spec requires ``process_local_edges()`` on each model's config class, returning the same
contract its pipeline YAML carries (a unit test compares them). Edges are class-level tuples,
so the contract is immutable data, not module state.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar


class ModelConfig:
    #: Registered model id (the ``omni.models`` entry point name).
    model_id: ClassVar[str]
    #: Package holding the pipeline file, e.g. ``omni_models.qwen3_tts``.
    package: ClassVar[str]
    #: Pipeline file stem inside the package (``pipeline`` or ``pipeline_<variant>``).
    variant: ClassVar[str] = "pipeline"
    #: ``(src, dst, reason)`` for every handoff that must stay inside one OS process.
    PROCESS_LOCAL_EDGES: ClassVar[tuple[tuple[str, str, str], ...]] = ()

    def process_local_edges(self) -> list[Any]:
        """The contract as ``omni_config.ProcessLocalEdge`` values (what the compiler checks)."""
        from omni_config.schema import ProcessLocalEdge

        return [ProcessLocalEdge(src=s, dst=d, reason=r) for s, d, r in self.PROCESS_LOCAL_EDGES]

    def pipeline_file(self) -> Path:
        return Path(str(resources.files(self.package).joinpath(f"{self.variant}.yaml")))

    def load(self, overrides: Sequence[str] = ()) -> Any:
        """The model's pipeline config, validated by omni-config."""
        from omni_config import load_config

        return load_config(self.pipeline_file(), overrides)
