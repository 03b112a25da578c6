"""Base of the per-model config classes: the Python face of a model's pipeline file.

The spec asks for ``process_local_edges()`` on each model's config class. The contract is
written once, in the model's pipeline YAML (the file the compiler, the linter and the runtime
read); this class only reads it back, so the two can never disagree.
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

    def process_local_edges(self) -> list[Any]:
        """The handoffs that must stay inside one OS process, as the pipeline file declares them
        (``omni_config.ProcessLocalEdge`` values, what the compiler checks)."""
        return list(self.load().process_local_edges)

    def pipeline_file(self) -> Path:
        return Path(str(resources.files(self.package).joinpath(f"{self.variant}.yaml")))

    def load(self, overrides: Sequence[str] = ()) -> Any:
        """The model's pipeline config, validated by omni-config."""
        from omni_config import load_config

        return load_config(self.pipeline_file(), overrides)
