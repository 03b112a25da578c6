"""The compiled process topology: what the runtime spawns, as plain frozen values.

Everything here is JSON-serialisable (:meth:`CompiledTopology.to_dict`) so the
parent can hand fully resolved specs to spawned children without pickle, and CI
can diff topologies as text.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class CompiledStage:
    """A logical stage with its wiring and declared placement."""

    name: str
    factory: str
    process: str
    """The declared process name (the stage's own name when it declared none)."""
    next: tuple[str, ...] = ()
    stream_to: tuple[str, ...] = ()
    wait_for: tuple[str, ...] = ()
    merge_fn: str | None = None
    route_fn: str | None = None
    terminal: bool = False
    factory_args: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    tp_size: int = 1
    gpu: tuple[int, ...] = ()
    """Declared GPU per TP rank, before replica placement; empty for a CPU stage."""
    memory_fraction: float | None = None


@dataclass(frozen=True)
class CompiledProcess:
    """An OS-process group after tensor parallelism, before replication."""

    name: str
    stages: tuple[str, ...]
    declared_process: str
    """The ``process`` name the stages declared (differs from ``name`` for TP ranks)."""
    tp_rank: int | None = None
    tp_size: int = 1
    num_replicas: int = 1
    replicated_by: str | None = None
    """The ``processes.<name>`` entry that replicates or moves this group, if any."""
    ray: dict[str, Any] = field(default_factory=dict)
    """``processes.<name>.ray`` as plain data (only the keys set): placement for the Ray backend."""
    restart: dict[str, Any] = field(default_factory=dict)
    """``processes.<name>.restart`` as plain data; empty: the schema's defaults (the runtime fills them in)."""


@dataclass(frozen=True)
class StagePlacement:
    """One stage (or one TP rank of it) inside one spawned OS process."""

    stage: str
    instance_stage: str
    """``<stage>@r<i>`` inside a replica, else the stage name."""
    tp_rank: int | None
    tp_size: int
    gpu: int | None
    memory_fraction: float | None


@dataclass(frozen=True)
class ProcessInstance:
    """One OS process the runtime spawns."""

    name: str
    """``<process>@r<i>`` for replicas of a process with num_replicas > 1, else the process name."""
    process: str
    """The :class:`CompiledProcess` this instance copies."""
    replica: int | None
    stages: tuple[StagePlacement, ...]

    @property
    def gpus(self) -> tuple[int, ...]:
        return tuple(sorted({p.gpu for p in self.stages if p.gpu is not None}))


@dataclass(frozen=True)
class CompiledEdge:
    src: str
    dst: str
    kinds: tuple[str, ...]
    """Subset of ("next", "stream_to", "wait_for") in that order."""
    cross_process: bool
    process_local_reason: str | None = None
    """The model's reason when the contract pins this edge inside one process."""


@dataclass(frozen=True)
class GpuShare:
    instance: str
    stage: str
    tp_rank: int | None
    memory_fraction: float | None


@dataclass(frozen=True)
class GpuBudget:
    gpu: int
    shares: tuple[GpuShare, ...]
    limit: float

    @property
    def processes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(share.instance for share in self.shares))

    @property
    def total(self) -> float:
        return round(sum(s.memory_fraction or 0.0 for s in self.shares), 6)


@dataclass(frozen=True)
class CompiledTopology:
    name: str | None
    entry_stage: str
    stages: tuple[CompiledStage, ...]
    processes: tuple[CompiledProcess, ...]
    instances: tuple[ProcessInstance, ...]
    edges: tuple[CompiledEdge, ...]
    gpus: tuple[GpuBudget, ...]
    num_gpus: int | None = None

    def stage(self, name: str) -> CompiledStage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(name)

    def process(self, name: str) -> CompiledProcess:
        for process in self.processes:
            if process.name == name:
                return process
        raise KeyError(name)

    def processes_of(self, stage: str) -> tuple[str, ...]:
        """OS-process groups a stage runs in (several for a TP stage)."""
        return tuple(p.name for p in self.processes if stage in p.stages)

    def instances_of(self, process: str) -> tuple[ProcessInstance, ...]:
        return tuple(i for i in self.instances if i.process == process)

    @property
    def cross_process_edges(self) -> tuple[CompiledEdge, ...]:
        return tuple(e for e in self.edges if e.cross_process)

    def to_dict(self) -> dict[str, Any]:
        return _plain(asdict(self))

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompiledTopology:
        return cls(
            name=data["name"],
            entry_stage=data["entry_stage"],
            stages=tuple(_stage(s) for s in data["stages"]),
            processes=tuple(_process(p) for p in data["processes"]),
            instances=tuple(_instance(i) for i in data["instances"]),
            edges=tuple(CompiledEdge(e["src"], e["dst"], tuple(e["kinds"]), e["cross_process"], e["process_local_reason"]) for e in data["edges"]),
            gpus=tuple(GpuBudget(g["gpu"], tuple(GpuShare(**s) for s in g["shares"]), g["limit"]) for g in data["gpus"]),
            num_gpus=data.get("num_gpus"),
        )

    @classmethod
    def from_json(cls, text: str) -> CompiledTopology:
        return cls.from_dict(json.loads(text))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _stage(d: dict[str, Any]) -> CompiledStage:
    d = dict(d)
    for key in ("next", "stream_to", "wait_for", "gpu"):
        d[key] = tuple(d[key])
    return CompiledStage(**d)


def _process(d: dict[str, Any]) -> CompiledProcess:
    d = dict(d)
    d["stages"] = tuple(d["stages"])
    return CompiledProcess(**d)


def _instance(d: dict[str, Any]) -> ProcessInstance:
    return ProcessInstance(d["name"], d["process"], d["replica"], tuple(StagePlacement(**p) for p in d["stages"]))
