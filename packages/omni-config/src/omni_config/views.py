"""Read-only conveniences derived from config fields.

Shared by the pydantic models (:mod:`omni_config.schema`) and the plain records
(:mod:`omni_config.records`) so the compiler reads both through one API.
"""

from __future__ import annotations


class StageViews:
    __slots__ = ()

    @property
    def memory_fraction(self) -> float | None:
        return self.runtime.resources.total_gpu_memory_fraction  # type: ignore[attr-defined]

    @property
    def gpu_ids(self) -> tuple[int, ...]:
        gpu = self.gpu  # type: ignore[attr-defined]
        if gpu is None:
            return ()
        return (gpu,) if isinstance(gpu, int) else tuple(gpu)


class PipelineViews:
    __slots__ = ()

    @property
    def entry(self) -> str:
        return self.entry_stage or self.stages[0].name  # type: ignore[attr-defined]

    def stage(self, name: str):
        for stage in self.stages:  # type: ignore[attr-defined]
            if stage.name == name:
                return stage
        raise KeyError(name)

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)  # type: ignore[attr-defined]
