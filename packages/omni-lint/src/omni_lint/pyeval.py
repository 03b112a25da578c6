"""A small static evaluator for contract expressions written in Python.

It computes, without importing anything, the values a config class declares:
literals, module constants (also imported from other modules of the tree),
f-strings and ``+`` of those, lists and tuples (with ``*splat``), dicts,
subscripts of those, ``a if test else b``, comparisons and ``not`` of known
values, ``StageConfig(...)`` / ``ProcessLocalEdge(...)`` calls (kept as their
keyword arguments), ``list()`` / ``tuple()``, calls of helper functions of the
tree (with their parameters' defaults) whose bodies are straight-line code
(assignments, subscript stores, ``append`` / ``extend`` / ``update`` / ``+=``,
``if`` on a known test, ``return``), ``Field(default=...)`` /
``Field(default_factory=...)``, class attributes through ``cls.`` / ``self.`` /
the class name, and ``super().method()``.

A value it cannot compute raises :class:`Unknown`, which names the expression,
so a contract it cannot read is a finding, never a silent pass. Only what the
contract needs must be computed, though: an argument of a ``StageConfig`` call,
a dict value, a list item or a helper's local that cannot be computed becomes an
:class:`Opaque` holding that :class:`Unknown`, raised only where the value is
used (a stage's ``factory`` or ``next``, an ``f``-string, a ``+``...). So a
``StageResourceConfig(total_gpu_memory_fraction=...)`` in a stage's ``runtime``
field, or a helper statement that only fills ``factory_args``, does not make a
contract unreadable, while an unreadable stage name or edge still does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from .bindings import assign_pairs, block_statements
from .project import Project
from .scan import ClassKey, FuncKey, ModuleInfo, dotted_name
from .symbols import ClassSym, FuncSym, ModuleSym
from .walk import walk

#: Call targets kept as their arguments (the last component of the callee's dotted name).
RECORD_CALLS = {"StageConfig": (), "ProcessLocalEdge": ("src", "dst", "reason"), "dict": ()}
_MAX_DEPTH = 64


class Unknown(Exception):
    """An expression the evaluator cannot compute statically."""

    def __init__(self, module: ModuleInfo, node: cst.CSTNode, why: str):
        self.module = module
        self.node = node
        self.why = why
        super().__init__(why)

    @property
    def code(self) -> str:
        assert self.module.parsed.module is not None
        text = " ".join(self.module.parsed.module.code_for_node(self.node).split())
        return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True)
class Record:
    """A recorded call such as ``StageConfig(name=..., factory=...)``: its kind, arguments, place."""

    kind: str
    args: dict[str, Any]
    module: ModuleInfo
    node: cst.CSTNode


@dataclass(frozen=True)
class Opaque:
    """A value the evaluator could not compute, kept until something needs it (then its
    :class:`Unknown` is raised: the finding names the expression that could not be read)."""

    unknown: Unknown


def need(value: Any) -> Any:
    """``value`` itself, or the :class:`Unknown` of an :class:`Opaque` raised."""
    if isinstance(value, Opaque):
        raise value.unknown
    return value


@dataclass
class Frame:
    module: ModuleInfo
    locals: dict[str, Any]
    cls: ClassKey | None = None


class Evaluator:
    def __init__(self, project: Project):
        self.project = project
        self._constants: dict[str, dict[str, list[cst.BaseExpression]]] = {}
        self.depth = 0

    # -- module and class names ----------------------------------------------------

    def constants(self, module: ModuleInfo) -> dict[str, list[cst.BaseExpression]]:
        found = self._constants.get(module.name)
        if found is None:
            found = {}
            assert module.parsed.module is not None
            for statement in block_statements(module.parsed.module):
                for name, value, _target in assign_pairs(statement):
                    if value is not None:
                        found.setdefault(name, []).append(value)
            self._constants[module.name] = found
        return found

    def module_name(self, module: ModuleInfo, name: str, node: cst.CSTNode) -> Any:
        """A module-level name: a constant (evaluated), an imported one, a function or class."""
        values = self.constants(module).get(name)
        if values:
            if len(values) > 1:
                raise Unknown(module, node, f"{name} is assigned {len(values)} times in {module.name}")
            return self.eval(values[0], Frame(module, {}))
        binding = module.imports.get(name)
        if binding is not None:
            sym = self.project.resolve_import(binding)
            if isinstance(sym, (FuncSym, ClassSym, ModuleSym)):
                return sym
            target = self.project.module(binding.module) if binding.attr is not None else None
            if target is not None:
                return self.module_name(target, binding.attr, node)  # type: ignore[arg-type]
        top = module.top.get(name)
        if isinstance(top, FuncKey):
            return FuncSym(top)
        if isinstance(top, ClassKey):
            return ClassSym(top)
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        if name in _BUILTINS:
            return _Builtin(name)
        raise Unknown(module, node, f"{name} is not a constant, class or function this analysis can see")

    def class_attribute(self, cls: ClassKey, name: str, node: cst.CSTNode, origin: ModuleInfo) -> Any:
        for key in self.project.mro(cls):
            klass = self.project.klass(key)
            module = self.project.module(key.module)
            if klass is None or module is None:
                continue
            if name in klass.methods:
                return FuncSym(klass.methods[name])
            for statement in block_statements(klass.node.body):
                for target, value, _node in assign_pairs(statement):
                    if target == name:
                        if value is None:
                            break
                        return self.field_value(value, Frame(module, {}, key))
        raise Unknown(origin, node, f"class {cls.qualname} has no attribute {name} this analysis can see")

    def field_value(self, value: cst.BaseExpression, frame: Frame) -> Any:
        """A class-level value; ``Field(default=...)`` and ``Field(default_factory=...)`` give the default."""
        if type(value) is cst.Call and (dotted_name(value.func) or "").rpartition(".")[2] == "Field":
            for arg in value.args:
                if arg.keyword is not None and arg.keyword.value == "default":
                    return self.eval(arg.value, frame)
                if arg.keyword is not None and arg.keyword.value == "default_factory":
                    return self.call(self.eval(arg.value, frame), [], {}, frame, arg.value)
            raise Unknown(frame.module, value, "Field(...) without default= or default_factory=")
        return self.eval(value, frame)

    # -- expressions ------------------------------------------------------------------

    def eval(self, node: cst.BaseExpression, frame: Frame) -> Any:
        self.depth += 1
        try:
            if self.depth > _MAX_DEPTH:
                raise Unknown(frame.module, node, "the evaluation nests too deep (a recursive helper?)")
            return self._eval(node, frame)
        finally:
            self.depth -= 1

    def lazy(self, node: cst.BaseExpression, frame: Frame) -> Any:
        """The value, or an :class:`Opaque` when it cannot be computed (raised only where it is needed)."""
        try:
            return self.eval(node, frame)
        except Unknown as unknown:
            return Opaque(unknown)

    def known(self, node: cst.BaseExpression, frame: Frame) -> Any:
        """The value, which must be computed (an :class:`Opaque` raises its :class:`Unknown`)."""
        return need(self.eval(node, frame))

    def _eval(self, node: cst.BaseExpression, frame: Frame) -> Any:
        kind = type(node)
        if kind is cst.SimpleString:
            return node.evaluated_value  # type: ignore[attr-defined]
        if kind is cst.Integer or kind is cst.Float:
            return node.evaluated_value  # type: ignore[attr-defined]
        if kind is cst.ConcatenatedString:
            return self._text(node.left, frame) + self._text(node.right, frame)  # type: ignore[attr-defined]
        if kind is cst.FormattedString:
            return self._fstring(node, frame)  # type: ignore[arg-type]
        if kind is cst.Name:
            name = node.value  # type: ignore[attr-defined]
            if name in frame.locals:
                return frame.locals[name]
            return self.module_name(frame.module, name, node)
        if kind in (cst.List, cst.Tuple, cst.Set):
            items: list[Any] = []
            for element in node.elements:  # type: ignore[attr-defined]
                if type(element) is cst.StarredElement:
                    items.extend(self._sequence(self.known(element.value, frame), element, frame))
                else:
                    items.append(self.lazy(element.value, frame))
            return tuple(items) if kind is cst.Tuple else items
        if kind is cst.Dict:
            result: dict[Any, Any] = {}
            for element in node.elements:  # type: ignore[attr-defined]
                if type(element) is not cst.DictElement:
                    raise Unknown(frame.module, element, "a ** splat in a dict")
                result[self._key(element.key, frame)] = self.lazy(element.value, frame)
            return result
        if kind is cst.BinaryOperation and type(node.operator) is cst.Add:  # type: ignore[attr-defined]
            left, right = self.known(node.left, frame), self.known(node.right, frame)  # type: ignore[attr-defined]
            if type(left) is type(right) and isinstance(left, (str, list, tuple)):
                return left + right
            raise Unknown(frame.module, node, "+ of values that are not both strings, lists or tuples")
        if kind is cst.IfExp:
            chosen = node.body if self._truth(node.test, frame) else node.orelse  # type: ignore[attr-defined]
            return self.eval(chosen, frame)
        if kind is cst.Subscript:
            return self._subscript(node, frame)  # type: ignore[arg-type]
        if kind is cst.Comparison:
            return self._comparison(node, frame)  # type: ignore[arg-type]
        if kind is cst.UnaryOperation and type(node.operator) is cst.Not:  # type: ignore[attr-defined]
            return not self._truth(node.expression, frame)  # type: ignore[attr-defined]
        if kind is cst.BooleanOperation:
            left_truth = self._truth(node.left, frame)  # type: ignore[attr-defined]
            if (type(node.operator) is cst.And) != left_truth:  # type: ignore[attr-defined]
                return self.known(node.left, frame)  # type: ignore[attr-defined]
            return self.eval(node.right, frame)  # type: ignore[attr-defined]
        if kind is cst.Attribute:
            return self._attribute(node, frame)  # type: ignore[arg-type]
        if kind is cst.Call:
            return self._call_node(node, frame)  # type: ignore[arg-type]
        if kind is cst.Lambda:
            return _Lambda(node, frame)  # type: ignore[arg-type]
        raise Unknown(frame.module, node, f"a {kind.__name__} expression")

    def _key(self, node: cst.BaseExpression, frame: Frame) -> Any:
        value = self.known(node, frame)
        if not isinstance(value, _PLAIN):
            raise Unknown(frame.module, node, "a key that is not a string, number, bool or None")
        return value

    def _truth(self, node: cst.BaseExpression, frame: Frame) -> bool:
        """Whether a test holds, for values whose truth Python fixes (not a record or a class)."""
        value = self.known(node, frame)
        if not isinstance(value, (*_PLAIN, list, tuple, dict)):
            raise Unknown(frame.module, node, "a test of a value whose truth this analysis cannot see")
        return bool(value)

    def _subscript(self, node: cst.Subscript, frame: Frame) -> Any:
        base = self.known(node.value, frame)
        if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index or not isinstance(base, (dict, list, tuple)):
            raise Unknown(frame.module, node, "a subscript of something that is not a dict, list or tuple")
        index = self._key(node.slice[0].slice.value, frame)  # type: ignore[attr-defined]
        try:
            return base[index]
        except (KeyError, IndexError, TypeError):
            raise Unknown(frame.module, node, f"{index!r} is not in the value subscripted") from None

    def _comparison(self, node: cst.Comparison, frame: Frame) -> bool:
        left = self.known(node.left, frame)
        for target in node.comparisons:
            right = self.known(target.comparator, frame)
            operator = type(target.operator)
            if operator is cst.Is or operator is cst.IsNot:
                if not (left is None or right is None or isinstance(left, bool) or isinstance(right, bool)):
                    raise Unknown(frame.module, node, "`is` of values other than None, True or False")
                holds = (left is right) == (operator is cst.Is)
            elif operator in (cst.Equal, cst.NotEqual) and isinstance(left, (*_PLAIN, list, tuple, dict)) and isinstance(right, (*_PLAIN, list, tuple, dict)):
                holds = (left == right) == (operator is cst.Equal)
            elif operator in (cst.In, cst.NotIn) and isinstance(right, (str, list, tuple, dict)) and isinstance(left, _PLAIN):
                holds = (left in right) == (operator is cst.In)
            else:
                raise Unknown(frame.module, node, "a comparison this analysis cannot compute")
            if not holds:
                return False
            left = right
        return True

    def _text(self, node: cst.BaseExpression, frame: Frame) -> str:
        value = self.known(node, frame)
        if not isinstance(value, str):
            raise Unknown(frame.module, node, "not a string")
        return value

    def _fstring(self, node: cst.FormattedString, frame: Frame) -> str:
        parts = []
        for part in node.parts:
            if type(part) is cst.FormattedStringText:
                parts.append(part.value)
                continue
            if part.conversion is not None or part.format_spec is not None:  # type: ignore[attr-defined]
                raise Unknown(frame.module, part, "an f-string field with a conversion or format spec")
            value = self.known(part.expression, frame)  # type: ignore[attr-defined]
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                raise Unknown(frame.module, part, "an f-string field that is not a string or integer constant")
            parts.append(str(value))
        return "".join(parts)

    def _sequence(self, value: Any, node: cst.CSTNode, frame: Frame) -> list[Any]:
        value = need(value)
        if isinstance(value, (list, tuple)):
            return list(value)
        raise Unknown(frame.module, node, "a splat of something that is not a list or tuple")

    def _attribute(self, node: cst.Attribute, frame: Frame) -> Any:
        base_node = node.value
        if type(base_node) is cst.Name and base_node.value in ("cls", "self") and frame.cls is not None and base_node.value not in frame.locals:
            return self.class_attribute(frame.cls, node.attr.value, node, frame.module)
        base = self.known(base_node, frame)
        if isinstance(base, ClassSym):
            return self.class_attribute(base.key, node.attr.value, node, frame.module)
        if isinstance(base, ModuleSym):
            module = self.project.module(base.name)
            if module is not None:
                return self.module_name(module, node.attr.value, node)
        if isinstance(base, _Super):
            for key in self.project.mro(base.cls)[1:]:
                klass = self.project.klass(key)
                if klass is not None and node.attr.value in klass.methods:
                    return _Bound(FuncSym(klass.methods[node.attr.value]), key)
            raise Unknown(frame.module, node, f"no base class of {base.cls.qualname} defines {node.attr.value}")
        raise Unknown(frame.module, node, "an attribute of a value this analysis cannot see")

    def _call_node(self, node: cst.Call, frame: Frame) -> Any:
        if type(node.func) is cst.Name and node.func.value == "super" and frame.cls is not None:
            return _Super(frame.cls)
        name = (dotted_name(node.func) or "").rpartition(".")[2]
        if name in RECORD_CALLS:
            positional = RECORD_CALLS[name]
            args: dict[str, Any] = {}
            for index, arg in enumerate(node.args):
                if arg.star:
                    raise Unknown(frame.module, arg, f"a * or ** argument to {name}()")
                if arg.keyword is not None:
                    args[arg.keyword.value] = self.lazy(arg.value, frame)
                elif index < len(positional):
                    args[positional[index]] = self.lazy(arg.value, frame)
                else:
                    raise Unknown(frame.module, arg, f"a positional argument to {name}()")
            return Record(name, args, frame.module, node)
        target = self.known(node.func, frame)
        positional_values = []
        keywords: dict[str, Any] = {}
        for arg in node.args:
            if arg.star:
                raise Unknown(frame.module, arg, "a * or ** argument")
            value = self.lazy(arg.value, frame)
            if arg.keyword is not None:
                keywords[arg.keyword.value] = value
            else:
                positional_values.append(value)
        return self.call(target, positional_values, keywords, frame, node)

    def call(self, target: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, node: cst.CSTNode) -> Any:
        target = need(target)
        if isinstance(target, _Builtin):
            if len(args) != 1 or kwargs:
                raise Unknown(frame.module, node, f"{target.name}() with other than one argument")
            return list(self._sequence(args[0], node, frame)) if target.name == "list" else tuple(self._sequence(args[0], node, frame))
        if isinstance(target, _Lambda):
            bound = _bind(target.node.params, args, kwargs, lambda param: self._default(param, target.frame))
            return self.eval(target.node.body, Frame(target.frame.module, {**target.frame.locals, **bound}, target.frame.cls))
        cls = None
        if isinstance(target, _Bound):
            target, cls = target.func, target.cls
        if isinstance(target, FuncSym):
            return self.run_function(target.key, args, kwargs, cls, node, frame)
        raise Unknown(frame.module, node, "a call of something that is not a helper function of the tree")

    def _default(self, param: cst.Param, frame: Frame) -> Any:
        if param.default is None:
            return Opaque(Unknown(frame.module, param, f"parameter {param.name.value} is not given a value"))
        return self.lazy(param.default, Frame(frame.module, {}, frame.cls))

    # -- helper functions ---------------------------------------------------------------

    def run_function(self, key: FuncKey, args: list[Any], kwargs: dict[str, Any], cls: ClassKey | None, node: cst.CSTNode, caller: Frame) -> Any:
        func = self.project.function(key)
        module = self.project.module(key.module)
        if func is None or module is None:
            raise Unknown(caller.module, node, f"{key.qualname} cannot be read")
        home = Frame(module, {}, cls or func.cls)
        locals_ = _bind(func.node.params, args, kwargs, lambda param: self._default(param, home), skip_first=func.kind in ("method", "classmethod"))
        frame = Frame(module, locals_, cls or func.cls)
        returned = self._run_block(func.node.body, frame, key)
        if returned is _FELL_THROUGH:
            raise Unknown(module, func.node, f"{key.qualname} returns nothing")
        return returned

    def _run_block(self, suite: cst.BaseSuite, frame: Frame, key: FuncKey) -> Any:
        """Run a block's statements; the returned value, or ``_FELL_THROUGH``.

        A statement it cannot run makes every name it binds or may change (assigned, stored into,
        a method called on it, passed to a call) an :class:`Opaque`: fine as long as nothing the
        contract needs is computed from them. A ``return`` it cannot decide raises."""
        body = suite.body if isinstance(suite.body, (list, tuple)) else [suite.body]
        for statement in body:
            if type(statement) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
                for small in statement.body:  # type: ignore[attr-defined]
                    if type(small) is cst.Return:
                        return None if small.value is None else self.eval(small.value, frame)
                    try:
                        self._run_small(small, frame, key)
                    except Unknown as unknown:
                        _taint(frame, _affected(small), unknown)
                continue
            if type(statement) is cst.If:
                try:
                    holds = self._truth(statement.test, frame)
                except Unknown as unknown:
                    if _has_return(statement):
                        raise
                    _taint(frame, _affected(statement), unknown)
                    continue
                branch = statement.body if holds else statement.orelse
                if type(branch) is cst.If:
                    branch = cst.IndentedBlock(body=[branch])
                elif type(branch) is cst.Else:
                    branch = branch.body
                if branch is not None:
                    returned = self._run_block(branch, frame, key)
                    if returned is not _FELL_THROUGH:
                        return returned
                continue
            unknown = Unknown(frame.module, statement, f"a statement of {key.qualname} that is not straight-line list building")
            if _has_return(statement):
                raise unknown
            _taint(frame, _affected(statement), unknown)
        return _FELL_THROUGH

    def _run_small(self, statement: cst.CSTNode, frame: Frame, key: FuncKey) -> None:
        kind = type(statement)
        if kind is cst.Expr and type(statement.value) in (cst.SimpleString, cst.ConcatenatedString):  # type: ignore[attr-defined]
            return  # docstring
        if kind is cst.Pass:
            return
        if kind is cst.Assign:
            value = self.lazy(statement.value, frame)  # type: ignore[attr-defined]
            for target in statement.targets:  # type: ignore[attr-defined]
                self._store(target.target, value, frame)
            return
        if kind is cst.AnnAssign and statement.value is not None:  # type: ignore[attr-defined]
            self._store(statement.target, self.lazy(statement.value, frame), frame)  # type: ignore[attr-defined]
            return
        if kind is cst.AugAssign and type(statement.target) is cst.Name and type(statement.operator) is cst.AddAssign:  # type: ignore[attr-defined]
            current = need(frame.locals.get(statement.target.value))  # type: ignore[attr-defined]
            added = self.known(statement.value, frame)  # type: ignore[attr-defined]
            if isinstance(current, list) and isinstance(added, (list, tuple)):
                current.extend(added)
                return
        if kind is cst.Expr and type(statement.value) is cst.Call:  # type: ignore[attr-defined]
            call = statement.value  # type: ignore[attr-defined]
            func_node = call.func
            if type(func_node) is cst.Attribute and type(func_node.value) is cst.Name and func_node.value.value in frame.locals:
                current = need(frame.locals[func_node.value.value])
                verb = func_node.attr.value
                plain = len(call.args) == 1 and not call.args[0].star and call.args[0].keyword is None
                if isinstance(current, list) and plain and verb in ("append", "extend"):
                    value = self.lazy(call.args[0].value, frame)
                    if verb == "append":
                        current.append(value)
                    else:
                        current.extend(self._sequence(value, call, frame))
                    return
                if isinstance(current, dict) and plain and verb == "update":
                    added = self.known(call.args[0].value, frame)
                    if isinstance(added, dict):
                        current.update(added)
                        return
        raise Unknown(frame.module, statement, f"a statement of {key.qualname} that is not straight-line list building")

    def _store(self, target: cst.BaseExpression, value: Any, frame: Frame) -> None:
        kind = type(target)
        if kind is cst.Name:
            frame.locals[target.value] = value  # type: ignore[attr-defined]
            return
        if kind in (cst.Tuple, cst.List):
            items = need(value)
            elements = target.elements  # type: ignore[attr-defined]
            if not isinstance(items, (list, tuple)) or len(items) != len(elements) or any(type(e) is cst.StarredElement for e in elements):
                raise Unknown(frame.module, target, "an unpacking of a value this analysis cannot split")
            for element, item in zip(elements, items):
                self._store(element.value, item, frame)
            return
        if kind is cst.Subscript and type(target.value) is cst.Name and target.value.value in frame.locals:  # type: ignore[attr-defined]
            container = need(frame.locals[target.value.value])  # type: ignore[attr-defined]
            slices = target.slice  # type: ignore[attr-defined]
            if isinstance(container, dict) and len(slices) == 1 and type(slices[0].slice) is cst.Index:
                container[self._key(slices[0].slice.value, frame)] = value
                return
        raise Unknown(frame.module, target, "a store into something other than a local name or dict")


_FELL_THROUGH = object()
_PLAIN = (str, int, float, bool, type(None))


def _taint(frame: Frame, names: set[str], unknown: Unknown) -> None:
    """Names a statement that could not run binds or may change become :class:`Opaque`, and so
    does every local that holds (or contains) a container they held: it may have changed too."""
    changed = [frame.locals[name] for name in names if isinstance(frame.locals.get(name), (list, dict))]
    for name in names:
        frame.locals[name] = Opaque(unknown)
    if changed:
        for name, value in list(frame.locals.items()):
            if any(_contains(value, item, 0) for item in changed):
                frame.locals[name] = Opaque(unknown)


def _contains(value: Any, item: Any, depth: int) -> bool:
    if value is item:
        return True
    if depth > 8:
        return True  # too deep to tell: say yes, so nothing changed escapes
    if isinstance(value, Record):
        value = value.args
    if isinstance(value, dict):
        return any(_contains(v, item, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_contains(v, item, depth + 1) for v in value)
    return False


class _Affected:
    """Names a statement binds, stores into, calls a method on or passes to a call."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        if kind is cst.AssignTarget or kind is cst.AugAssign or kind is cst.AnnAssign or kind is cst.For or kind is cst.CompFor or kind is cst.NamedExpr:
            self._root(node.target, whole=True)  # type: ignore[attr-defined]
        elif kind is cst.AsName:
            self._root(node.name, whole=True)  # type: ignore[attr-defined]
        elif kind is cst.Del:
            self._root(node.target, whole=True)  # type: ignore[attr-defined]
        elif kind is cst.Call:
            if type(node.func) is cst.Attribute:  # type: ignore[attr-defined]
                self._root(node.func.value, whole=False)  # type: ignore[attr-defined]
            for arg in node.args:  # type: ignore[attr-defined]
                self._root(arg.value, whole=False)
        return kind not in (cst.FunctionDef, cst.ClassDef, cst.Lambda)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass

    def _root(self, node: cst.BaseExpression, whole: bool) -> None:
        kind = type(node)
        if kind is cst.Name:
            self.names.add(node.value)  # type: ignore[attr-defined]
        elif kind in (cst.Tuple, cst.List) and whole:
            for element in node.elements:  # type: ignore[attr-defined]
                self._root(element.value, whole)
        elif kind is cst.StarredElement:
            self._root(node.value, whole)  # type: ignore[attr-defined]
        elif kind in (cst.Attribute, cst.Subscript):
            self._root(node.value, whole=False)  # type: ignore[attr-defined]


def _affected(statement: cst.CSTNode) -> set[str]:
    finder = _Affected()
    walk(statement, finder)
    return finder.names


class _ReturnFinder:
    def __init__(self) -> None:
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) is cst.Return:
            self.found = True
        return not self.found and type(node) not in (cst.FunctionDef, cst.ClassDef, cst.Lambda)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass


def _has_return(statement: cst.CSTNode) -> bool:
    finder = _ReturnFinder()
    walk(statement, finder)
    return finder.found


@dataclass(frozen=True)
class _Builtin:
    name: str


_BUILTINS = {"list", "tuple"}


@dataclass(frozen=True)
class _Lambda:
    node: cst.Lambda
    frame: Frame


@dataclass(frozen=True)
class _Super:
    cls: ClassKey


@dataclass(frozen=True)
class _Bound:
    func: FuncSym
    cls: ClassKey


def _bind(params: cst.Parameters, args: list[Any], kwargs: dict[str, Any], default: Any, skip_first: bool = False) -> dict[str, Any]:
    """Arguments by parameter name: positional, keyword, else the parameter's default (``default(param)``)."""
    positional = [*params.posonly_params, *params.params][1 if skip_first else 0 :]
    bound = {param.name.value: value for param, value in zip(positional, args)}
    bound.update(kwargs)
    for param in (*positional, *params.kwonly_params):
        if param.name.value not in bound:
            bound[param.name.value] = default(param)
    return bound
