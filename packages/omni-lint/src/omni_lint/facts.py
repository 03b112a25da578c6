"""What the analysis records about one function: its accesses to state and what it reaches.

These values are the vocabulary shared by the analyzer (:mod:`omni_lint.analyzer`,
which resolves names across modules) and the walker (:mod:`omni_lint.walker`,
which classifies each use of a state inside one function body).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .scan import ClassKey, FuncInfo, FuncKey, ImportBinding, ModuleInfo, StateKey
from .source import Located, ParsedFile
from .symbols import ParamKey, SelfKey, Sym

AccessKey = StateKey | SelfKey | ParamKey


@dataclass(frozen=True)
class Access(Located):
    key: AccessKey
    kind: str  # read | write | cache | rebind (an attribute or parameter given a new object)
    parsed: ParsedFile = field(compare=False, repr=False)
    node: cst.CSTNode = field(compare=False, repr=False)
    #: inside a method (reached with every method of its class, so sites say less about who runs them)
    in_method: bool = field(default=False, compare=False)
    #: how the state is touched: ``store``, ``del``, ``aug``, ``subscript``, ``call:<method>``, ``probe``
    #: (only tested in an ``if``), ``name``...: picks the publishing write and the consuming read to cite
    form: str = field(default="name", compare=False)
    #: inside a lambda (runs when the lambda is called, not when the function runs)
    deferred: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Facts:
    accesses: tuple[Access, ...] = ()
    reaches: tuple[FuncKey | ClassKey, ...] = ()
    self_calls: tuple[FuncKey, ...] = ()
    #: methods called on a parameter or a ``self`` attribute (``self.box.stash(...)``): the object is
    #: not known here, so the caller resolves the verbs against the class of what it passes in
    verbs: tuple[tuple[SelfKey | ParamKey, str], ...] = ()
    #: calls this function makes that cannot be followed (``import_module(name)``): (file, call node)
    unresolved: tuple[tuple[ParsedFile, cst.Call], ...] = ()
    #: functions and constructors called while the body runs (not from a lambda or a returned closure)
    calls: tuple[FuncKey, ...] = ()


@dataclass
class Scope:
    func: FuncInfo
    module: ModuleInfo
    parent: Scope | None
    locals: frozenset[str]
    globals: frozenset[str]
    nonlocals: frozenset[str]
    imports: dict[str, ImportBinding]
    defs: dict[str, FuncKey | ClassKey]
    values: dict[str, list[cst.BaseExpression]]
    params: frozenset[str] = frozenset()
    #: how many times each local is bound (assignments, loop targets, with/except names...)
    bindings: dict[str, int] = field(default_factory=dict)
    self_name: str | None = None
    self_sym: Sym | None = None


def param_names(params: cst.Parameters) -> list[str]:
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param:
            names.append(star.name.value)
    return names


