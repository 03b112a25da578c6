"""The pipeline config schema: one schema for both tiers (docs/concepts.md, "Two config tiers").

Values are frozen pydantic models with unknown keys forbidden, so a misspelt key
is an error with a did-you-mean instead of a silently ignored setting. The
models are built lazily (``defer_build``): importing this module costs little,
and the validators are built on the first validation, which is the only thing
``omni-compile`` pays for besides importing pydantic and PyYAML.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from . import rules
from .optional import drop_disabled_stages

NameList = Annotated[list[str], BeforeValidator(rules.name_list, json_schema_input_type=str | list[str] | None)]
#: A ``processes`` key, checked per key so an error names ``processes.<key>``.
ProcessName = Annotated[str, AfterValidator(rules.process_name)]
StageName = Annotated[str, AfterValidator(rules.stage_name)]
DottedPath = Annotated[str, AfterValidator(rules.dotted_path)]
EnvName = Annotated[str, AfterValidator(rules.env_name)]
EnvValue = Annotated[str, AfterValidator(rules.env_value)]
JsonArgs = Annotated[dict[str, Any], AfterValidator(rules.json_value)]
#: Upper bounds that keep a hostile file from asking for millions of OS processes.
MAX_TP_SIZE = 1024
MAX_REPLICAS = 1024
GpuSpec = Annotated[int | list[int] | None, BeforeValidator(rules.gpu_spec)]
RayResourceName = Annotated[str, AfterValidator(rules.ray_resource_name)]
RayResourceAmount = Annotated[float, Field(gt=0), AfterValidator(rules.ray_resource_amount)]
RayLabelKey = Annotated[str, AfterValidator(rules.ray_label_key)]
DeviceList = Annotated[list[int] | None, BeforeValidator(rules.replica_devices, json_schema_input_type=int | list[int] | None)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False)


class ResourcesConfig(_Frozen):
    """Placement-accounting declarations (not an allocator-enforced limit)."""

    total_gpu_memory_fraction: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Share of the GPU's memory this stage declares. Required when OS processes share a GPU.",
    )


class StageRuntimeConfig(_Frozen):
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)


class KnobConfig(_Frozen):
    """The type and range of one ``factory_args`` value an operator may set (model tier).

    A stage that declares ``knobs`` lets a deployment file or ``--stages.S.factory_args.K``
    set exactly those arguments, and every value (the model's default included) is checked
    here before any process starts, instead of failing inside the factory.
    """

    type: Literal["int", "float", "str", "bool"] = Field(description="Value type; an int is accepted where a float is expected.")
    min: float | None = Field(default=None, description="Smallest allowed value (int and float knobs).")
    max: float | None = Field(default=None, description="Largest allowed value (int and float knobs).")
    choices: list[str] | None = Field(default=None, min_length=1, description="The allowed values of a str knob.")
    nullable: bool = Field(default=False, description="null is allowed (it means the stage's automatic choice).")
    help: str | None = Field(default=None, description="What the knob does, shown in errors.")

    @model_validator(mode="after")
    def _consistent(self) -> KnobConfig:
        problem = rules.knob_declaration_problem(self.type, self.min, self.max, self.choices)
        if problem:
            raise ValueError(problem)
        return self


class StageConfig(_Frozen):
    """One pipeline stage. ``process`` is the only source of truth for process topology."""

    name: StageName = Field(description="Stage name, unique in the pipeline.")
    factory: DottedPath = Field(description="Dotted path of the factory: 'pkg.mod:fn' or 'pkg.mod.fn'.")
    next: NameList = Field(default_factory=list, description="Stages that receive this stage's output payload.")
    terminal: bool = Field(default=False, description="A request completes when a terminal stage returns.")
    stream_to: NameList = Field(default_factory=list, description="Stages that receive streamed chunks while this stage runs.")
    wait_for: NameList = Field(default_factory=list, description="Stages whose payloads are merged (fan-in) before this stage runs.")
    merge_fn: DottedPath | None = Field(default=None, description="Dotted path of the fan-in merge function; required with wait_for.")
    route_fn: DottedPath | None = Field(default=None, description="Dotted path of a function choosing among 'next' targets.")
    factory_args: JsonArgs = Field(default_factory=dict, description="Keyword arguments for the factory.")
    knobs: dict[str, KnobConfig] = Field(
        default_factory=dict,
        description="Type and range of the factory_args a deployment may set (model tier); each needs its default in factory_args.",
    )
    env: dict[EnvName, EnvValue] = Field(default_factory=dict, description="Environment variables set in the stage's OS process.")
    process: ProcessName | None = Field(default=None, description="OS process name. Stages naming the same process share it; none means the stage runs alone.")
    gpu: GpuSpec = Field(default=None, description="GPU id, or one id per TP rank.")
    tp_size: int = Field(default=1, ge=1, le=MAX_TP_SIZE, description="Tensor-parallel degree; > 1 gives the stage one OS process per rank.")
    runtime: StageRuntimeConfig = Field(default_factory=StageRuntimeConfig)
    optional: bool = Field(
        default=False,
        description="Model tier: the stage is off (removed with its edges) unless a deployment sets enabled: true; e.g. the aligner.",
    )
    enabled: bool | None = Field(default=None, description="Deployment tier: true switches an optional stage on (only optional stages take it).")

    @field_validator("enabled")
    @classmethod
    def _enabled_needs_optional(cls, value: bool | None, info: ValidationInfo) -> bool | None:
        if value is not None and not info.data.get("optional", False):
            raise ValueError("the stage is not optional, so it cannot be switched on or off; only stages the model declares optional: true take enabled")
        return value

    @property
    def memory_fraction(self) -> float | None:
        return self.runtime.resources.total_gpu_memory_fraction

    @property
    def gpu_ids(self) -> tuple[int, ...]:
        """One GPU id per TP rank; empty for a CPU stage."""
        if self.gpu is None:
            return ()
        return (self.gpu,) if isinstance(self.gpu, int) else tuple(self.gpu)


class RayPlacementConfig(_Frozen):
    """Where the Ray backend may place a process's actors; the local backend ignores it (with a notice)."""

    resources: dict[RayResourceName, RayResourceAmount] = Field(
        default_factory=dict,
        description="Custom Ray resources each instance asks for, e.g. {node_b: 1} to pin it to the nodes that offer node_b.",
    )
    num_cpus: float | None = Field(default=None, ge=0, description="CPUs each instance reserves on its node (Ray's default for actors: 0 while running).")
    label_selector: dict[RayLabelKey, str] = Field(
        default_factory=dict,
        description="Ray node labels the node must match, e.g. {ray.io/accelerator-type: H100} or {zone: 'in(a,b)'}.",
    )


class RestartPolicyConfig(_Frozen):
    """How the runtime restarts a process instance that died (the defaults apply to every process)."""

    max_restarts: int = Field(default=5, ge=0, description="Restarts allowed within window_s; past them the process stays dead and the runtime is unhealthy. 0 never restarts.")
    window_s: float = Field(default=60.0, gt=0, description="Seconds over which max_restarts is counted (a sliding window).")
    backoff_s: float = Field(default=1.0, ge=0, description="Seconds before the first restart; doubled for each further restart in the window (at most 30 s).")


class ProcessConfig(_Frozen):
    num_replicas: int = Field(default=1, ge=1, le=MAX_REPLICAS, description="Instances of the whole process; each request keeps one.")
    replica_devices: DeviceList = Field(
        default=None,
        description="num_replicas * tp_size GPU ids, one consecutive group per replica. Moves the process even with num_replicas: 1.",
    )
    ray: RayPlacementConfig = Field(default_factory=RayPlacementConfig, description="Placement on a Ray cluster (omni serve --backend ray).")
    restart: RestartPolicyConfig = Field(default_factory=RestartPolicyConfig, description="Restart policy when an instance of this process dies.")


class PlacementConfig(_Frozen):
    max_total_gpu_memory_fraction_per_gpu: float = Field(default=1.0, gt=0, le=1)
    require_memory_fraction_for_colocation: bool = Field(
        default=True,
        description="false allows OS processes to share a GPU without fractions, only when StageConfig.gpu alone declares the sharing.",
    )
    num_gpus: int | None = Field(default=None, ge=1, description="Device count to check GPU ids against.")


class ProcessLocalEdge(_Frozen):
    """A handoff that must stay inside one OS process, with the model's reason."""

    src: str
    dst: str
    reason: str = Field(min_length=1)


class PipelineConfig(_Frozen):
    name: str | None = Field(default=None, description="Model name served by this pipeline.")
    entry_stage: str | None = Field(default=None, description="Stage that admits requests; defaults to the first stage.")
    stages: list[StageConfig] = Field(min_length=1)
    processes: dict[ProcessName, ProcessConfig] = Field(default_factory=dict)
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    process_local_edges: list[ProcessLocalEdge] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _without_disabled_stages(cls, raw: Any) -> Any:
        return drop_disabled_stages(raw)

    @property
    def entry(self) -> str:
        """The stage that admits requests: ``entry_stage``, else the first stage."""
        return self.entry_stage or self.stages[0].name

    def stage(self, name: str) -> StageConfig:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(name)

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)
