"""The symbols name resolution yields: what a dotted name in the tree refers to.

:class:`~.project.Project` resolves names to these; the walker, the evaluator and the
reach analysis read them. Keys (``SelfKey``, ``ParamKey``) name places the summaries
track across functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from .scan import ClassKey, FuncKey, StateKey


@dataclass(frozen=True)
class ModuleSym:
    name: str


@dataclass(frozen=True)
class FuncSym:
    key: FuncKey


@dataclass(frozen=True)
class ClassSym:
    key: ClassKey


@dataclass(frozen=True)
class StateSym:
    key: StateKey


@dataclass(frozen=True)
class SelfKey:
    """An attribute of ``self`` inside a class's methods (used to summarise registry methods)."""

    cls: ClassKey
    attr: str


@dataclass(frozen=True)
class SelfAttrSym:
    key: SelfKey


@dataclass(frozen=True)
class ParamKey:
    """A parameter of a function of the tree (used to summarise what a callee does to an argument)."""

    func: FuncKey
    name: str


@dataclass(frozen=True)
class ParamSym:
    key: ParamKey


@dataclass(frozen=True)
class InstanceSym:
    """``self`` in a method of ``cls``."""

    cls: ClassKey


@dataclass(frozen=True)
class ClassSelfSym:
    """``cls`` in a classmethod of ``cls``."""

    cls: ClassKey


@dataclass(frozen=True)
class SuperSym:
    """``super()`` inside a method of ``cls``."""

    cls: ClassKey


Sym = ModuleSym | FuncSym | ClassSym | StateSym | SelfAttrSym | ParamSym | InstanceSym | ClassSelfSym | SuperSym
