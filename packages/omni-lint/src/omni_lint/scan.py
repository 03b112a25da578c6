"""One module's definitions: imports, functions, classes and candidate state.

This is the per-file half of the analysis (no cross-module resolution), so it
runs once per file however many stages reach it. Which module-level names are
mutable state is decided here where the value alone says so (container
literals and constructors, names rebound through ``global``, class-level
containers); instances of classes defined elsewhere in the tree are left as
candidates for the project to resolve.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from .bindings import Bindings, assign_pairs, block_statements, function_bindings
from .source import Located, ParsedFile


@dataclass(frozen=True, order=True)
class FuncKey:
    module: str
    qualname: str


@dataclass(frozen=True, order=True)
class ClassKey:
    module: str
    qualname: str


@dataclass(frozen=True, order=True)
class StateKey:
    module: str
    name: str

    @property
    def display(self) -> str:
        return self.name


@dataclass(frozen=True)
class ImportBinding:
    """``import module`` (attr None) or ``from module import attr``."""

    module: str
    attr: str | None = None


#: Constructors of mutable containers, by the last component of their dotted name.
CONTAINER_CTORS = {
    "dict": "dict",
    "list": "list",
    "set": "set",
    "bytearray": "list",
    "deque": "deque",
    "defaultdict": "dict",
    "OrderedDict": "dict",
    "Counter": "dict",
    "ChainMap": "dict",
    "WeakValueDictionary": "dict",
    "WeakKeyDictionary": "dict",
    "WeakSet": "set",
    "Queue": "queue",
    "SimpleQueue": "queue",
    "LifoQueue": "queue",
    "PriorityQueue": "queue",
    "JoinableQueue": "queue",
}

#: Values that are never state on their own: immutable, sentinels, locks, loggers, types.
NOT_STATE_CTORS = {
    "frozenset", "tuple", "object", "str", "int", "float", "bool", "bytes", "complex", "range",
    "Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore", "Event", "Barrier",
    "getLogger", "compile", "TypeVar", "ParamSpec", "NewType", "namedtuple", "NamedTuple",
    "field", "ContextVar", "local", "MappingProxyType", "Enum", "partial", "cache", "lru_cache",
}


@dataclass
class FuncInfo:
    key: FuncKey
    node: cst.FunctionDef
    cls: ClassKey | None
    parent: FuncKey | None
    kind: str  # function | method | classmethod | staticmethod
    nested: list[FuncKey | ClassKey] = field(default_factory=list)
    _bindings: Bindings | None = field(default=None, repr=False)

    @property
    def bindings(self) -> Bindings:
        """Names the body binds (computed once, shared by the scan and the analysis)."""
        if self._bindings is None:
            self._bindings = function_bindings(self.node)
        return self._bindings


@dataclass
class ClassInfo:
    key: ClassKey
    node: cst.ClassDef
    methods: dict[str, FuncKey] = field(default_factory=dict)
    class_states: dict[str, StateKey] = field(default_factory=dict)


@dataclass(frozen=True)
class StateDef(Located):
    key: StateKey
    kind: str  # dict | list | set | deque | queue | instance | global | object
    parsed: ParsedFile = field(compare=False, repr=False)
    node: cst.CSTNode = field(compare=False, repr=False)
    #: for registry instances: the class of the tree it is an instance of
    class_key: ClassKey | None = None


@dataclass
class Candidate:
    """A module-level ``NAME = Callee(...)`` whose callee may be a class of the tree."""

    name: str
    callee: cst.BaseExpression
    node: cst.CSTNode


@dataclass
class ModuleInfo:
    name: str
    parsed: ParsedFile
    is_package: bool
    imports: dict[str, ImportBinding] = field(default_factory=dict)
    functions: dict[str, FuncInfo] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    top: dict[str, FuncKey | ClassKey] = field(default_factory=dict)
    states: dict[str, StateDef] = field(default_factory=dict)
    candidates: dict[str, Candidate] = field(default_factory=dict)
    #: module-level names assigned at top level (a later plain rebinding hides an earlier state)
    assigned: set[str] = field(default_factory=set)
    #: modules whose names ``from X import *`` brings in
    star_imports: list[str] = field(default_factory=list)
    #: module-level import statements with the dotted modules they need (checked for missing modules)
    import_sites: list[tuple[cst.CSTNode, tuple[str, ...]]] = field(default_factory=list)

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of names, else None (iterative: chains can be long)."""
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def resolve_relative(module: ModuleInfo, level: int, target: str | None) -> str:
    base = module.package.split(".") if module.package else []
    if level > 1:
        base = base[: len(base) - (level - 1)] if level - 1 <= len(base) else []
    parts = [p for p in [".".join(base), target or ""] if p]
    return ".".join(parts)


def import_bindings(module: ModuleInfo, node: cst.Import | cst.ImportFrom) -> Iterator[tuple[str, ImportBinding]]:
    if type(node) is cst.Import:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                yield alias.asname.name.value, ImportBinding(full)
            else:
                top = full.split(".")[0]
                yield top, ImportBinding(top)
        return
    level = len(node.relative)
    target = dotted_name(node.module) if node.module is not None else None
    source = resolve_relative(module, level, target) if level else (target or "")
    if type(node.names) is cst.ImportStar:
        return
    for alias in node.names:
        name = dotted_name(alias.name)
        if name is None:
            continue
        bound = alias.asname.name.value if alias.asname is not None and type(alias.asname.name) is cst.Name else name
        yield bound, ImportBinding(source, name)


def imported_modules(module: ModuleInfo, node: cst.Import | cst.ImportFrom) -> tuple[str, ...]:
    """The modules an import statement needs: ``import a.b`` -> a.b, ``from .x import y`` -> pkg.x."""
    if type(node) is cst.Import:
        return tuple(name for name in (dotted_name(alias.name) for alias in node.names) if name)
    level = len(node.relative)
    target = dotted_name(node.module) if node.module is not None else None
    source = resolve_relative(module, level, target) if level else (target or "")
    return (source,) if source else ()


def container_kind(value: cst.BaseExpression) -> str | None:
    """The container kind of a value that is mutable state on its own, else None."""
    if type(value) in (cst.Dict, cst.DictComp):
        return "dict"
    if type(value) in (cst.List, cst.ListComp):
        return "list"
    if type(value) in (cst.Set, cst.SetComp):
        return "set"
    if type(value) is cst.Call:
        name = dotted_name(value.func)
        if name is not None:
            return CONTAINER_CTORS.get(name.rpartition(".")[2])
    return None


def is_candidate_call(value: cst.BaseExpression) -> bool:
    if type(value) is not cst.Call:
        return False
    name = dotted_name(value.func)
    if name is None:
        return False
    last = name.rpartition(".")[2]
    return last not in CONTAINER_CTORS and last not in NOT_STATE_CTORS


def _decorator_names(node: cst.FunctionDef) -> set[str]:
    names = set()
    for decorator in node.decorators:
        expr = decorator.decorator
        if type(expr) is cst.Call:
            expr = expr.func
        name = dotted_name(expr)
        if name:
            names.add(name.rpartition(".")[2])
    return names


def scan_module(name: str, parsed: ParsedFile, is_package: bool) -> ModuleInfo:
    info = ModuleInfo(name, parsed, is_package)
    assert parsed.module is not None
    rebound: dict[str, cst.CSTNode] = {}
    may_rebind = "global" in (parsed.source or "")

    def add_function(node: cst.FunctionDef, qual: str, cls: ClassKey | None, parent: FuncKey | None) -> FuncKey:
        key = FuncKey(name, qual)
        kind = "function"
        if cls is not None:
            decorators = _decorator_names(node)
            kind = "staticmethod" if "staticmethod" in decorators else "classmethod" if "classmethod" in decorators else "method"
        func = FuncInfo(key, node, cls, parent, kind)
        info.functions[qual] = func
        if may_rebind:
            bindings = func.bindings
            for global_name, global_node in bindings.globals.items():
                if global_name in bindings.assigned:
                    rebound.setdefault(global_name, global_node)
        walk_body(node.body, qual, None, key, func)
        return key

    def add_class(node: cst.ClassDef, qual: str, parent: FuncKey | None) -> ClassKey:
        key = ClassKey(name, qual)
        klass = ClassInfo(key, node)
        info.classes[qual] = klass
        for statement in block_statements(node.body):
            if type(statement) is cst.FunctionDef:
                klass.methods[statement.name.value] = add_function(statement, f"{qual}.{statement.name.value}", key, parent)
            elif type(statement) is cst.ClassDef:
                add_class(statement, f"{qual}.{statement.name.value}", parent)
            else:
                for attr, value, target in assign_pairs(statement):
                    kind = container_kind(value) if value is not None else None
                    if kind is not None:
                        state_key = StateKey(name, f"{node.name.value}.{attr}")
                        klass.class_states[attr] = state_key
                        info.states[state_key.name] = StateDef(state_key, kind, parsed, target)
        return key

    def walk_body(suite: cst.BaseSuite, prefix: str, cls: ClassKey | None, parent: FuncKey | None, owner: FuncInfo | None) -> None:
        for statement in block_statements(suite):
            if type(statement) is cst.FunctionDef:
                key = add_function(statement, f"{prefix}.{statement.name.value}", None, parent)
                if owner is not None:
                    owner.nested.append(key)
            elif type(statement) is cst.ClassDef:
                ckey = add_class(statement, f"{prefix}.{statement.name.value}", parent)
                if owner is not None:
                    owner.nested.append(ckey)

    for statement in block_statements(parsed.module):
        if type(statement) is cst.FunctionDef:
            info.top[statement.name.value] = add_function(statement, statement.name.value, None, None)
        elif type(statement) is cst.ClassDef:
            info.top[statement.name.value] = add_class(statement, statement.name.value, None)
        elif type(statement) in (cst.Import, cst.ImportFrom):
            for bound, binding in import_bindings(info, statement):
                info.imports[bound] = binding
            info.import_sites.append((statement, imported_modules(info, statement)))
            if type(statement) is cst.ImportFrom and type(statement.names) is cst.ImportStar:
                level = len(statement.relative)
                target = dotted_name(statement.module) if statement.module is not None else None
                info.star_imports.append(resolve_relative(info, level, target) if level else (target or ""))
        else:
            for target_name, value, target in assign_pairs(statement):
                info.assigned.add(target_name)
                info.states.pop(target_name, None)
                info.candidates.pop(target_name, None)
                if value is None:
                    continue
                kind = container_kind(value)
                if kind is not None:
                    info.states[target_name] = StateDef(StateKey(name, target_name), kind, parsed, target)
                elif is_candidate_call(value):
                    assert type(value) is cst.Call
                    info.candidates[target_name] = Candidate(target_name, value.func, target)

    for global_name, global_node in rebound.items():
        if global_name in info.states:
            continue
        node = _first_assignment(parsed, global_name) or global_node
        info.states[global_name] = StateDef(StateKey(name, global_name), "global", parsed, node)
    return info


def _first_assignment(parsed: ParsedFile, wanted: str) -> cst.CSTNode | None:
    assert parsed.module is not None
    for statement in block_statements(parsed.module):
        for target_name, _value, target in assign_pairs(statement):
            if target_name == wanted:
                return target
    return None
