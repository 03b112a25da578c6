"""Plain frozen values with the schema's field names, built by pydantic-core.

``omni-compile`` is started once per CI check, so its cold start matters:
building pydantic's ``BaseModel`` classes costs about as much as importing
pydantic and PyYAML together. The records below are what pydantic-core's
validator produces from the generated core schema (:mod:`omni_config._core_schema`,
itself generated from :mod:`omni_config.schema`): the same fields, defaults,
rules and errors, without the model machinery. They read like the models
(attributes plus :mod:`omni_config.views`), so :func:`omni_compiler.compile`
takes either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .views import PipelineViews, StageViews


class Record:
    """Frozen: pydantic-core fills ``__dict__`` directly; nothing may reassign a field afterwards."""

    # The slots pydantic-core's model validator writes besides the fields.
    __slots__ = ("__dict__", "__pydantic_extra__", "__pydantic_fields_set__", "__pydantic_private__")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen; cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # fields hold lists and dicts

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({fields})"

    def to_dict(self) -> dict[str, Any]:
        """Plain data, nested records included (``model_dump`` of the pydantic models)."""
        return {k: _plain(v) for k, v in self.__dict__.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def make(cls: type[Record], **fields: Any) -> Record:
    """A record from already-valid field values (the generated defaults)."""
    record = object.__new__(cls)
    for slot, value in (("__dict__", fields), ("__pydantic_extra__", None), ("__pydantic_private__", None), ("__pydantic_fields_set__", set())):
        object.__setattr__(record, slot, value)
    return record


def constant(record: Record) -> Callable[[], Record]:
    """A default factory returning one shared default; safe because records are frozen."""
    return lambda: record


class ResourcesConfig(Record):
    __slots__ = ()


class StageRuntimeConfig(Record):
    __slots__ = ()


class StageConfig(Record, StageViews):
    __slots__ = ()


class RayPlacementConfig(Record):
    __slots__ = ()


class RestartPolicyConfig(Record):
    __slots__ = ()


class ProcessConfig(Record):
    __slots__ = ()


class PlacementConfig(Record):
    __slots__ = ()


class ProcessLocalEdge(Record):
    __slots__ = ()


class PipelineConfig(Record, PipelineViews):
    __slots__ = ()
