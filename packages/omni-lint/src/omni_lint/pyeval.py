"""A small static evaluator for contract expressions written in Python.

It computes, without importing anything, the values a config class declares:
literals, module constants (also imported from other modules of the tree),
f-strings and ``+`` of those, lists and tuples (with ``*splat``), dicts,
``StageConfig(...)`` / ``ProcessLocalEdge(...)`` calls (kept as their keyword
arguments), ``list()`` / ``tuple()``, calls of helper functions of the tree
whose bodies are straight-line code (assignments, ``append`` / ``extend`` /
``+=``, ``return``), ``Field(default=...)`` / ``Field(default_factory=...)``,
class attributes through ``cls.`` / ``self.`` / the class name, and
``super().method()``. Everything else raises :class:`Unknown`, which names the
expression, so a contract it cannot read is a finding, never a silent pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from .bindings import assign_pairs, block_statements
from .project import Project
from .scan import ClassKey, FuncKey, ModuleInfo, dotted_name
from .symbols import ClassSym, FuncSym, ModuleSym

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
                value = self.eval(element.value, frame)
                if type(element) is cst.StarredElement:
                    items.extend(self._sequence(value, element, frame))
                else:
                    items.append(value)
            return tuple(items) if kind is cst.Tuple else items
        if kind is cst.Dict:
            result: dict[Any, Any] = {}
            for element in node.elements:  # type: ignore[attr-defined]
                if type(element) is not cst.DictElement:
                    raise Unknown(frame.module, element, "a ** splat in a dict")
                result[self.eval(element.key, frame)] = self.eval(element.value, frame)
            return result
        if kind is cst.BinaryOperation and type(node.operator) is cst.Add:  # type: ignore[attr-defined]
            left, right = self.eval(node.left, frame), self.eval(node.right, frame)  # type: ignore[attr-defined]
            if type(left) is type(right) and isinstance(left, (str, list, tuple)):
                return left + right
            raise Unknown(frame.module, node, "+ of values that are not both strings, lists or tuples")
        if kind is cst.Attribute:
            return self._attribute(node, frame)  # type: ignore[arg-type]
        if kind is cst.Call:
            return self._call_node(node, frame)  # type: ignore[arg-type]
        if kind is cst.Lambda:
            return _Lambda(node, frame)  # type: ignore[arg-type]
        raise Unknown(frame.module, node, f"a {kind.__name__} expression")

    def _text(self, node: cst.BaseExpression, frame: Frame) -> str:
        value = self.eval(node, frame)
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
            value = self.eval(part.expression, frame)  # type: ignore[attr-defined]
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                raise Unknown(frame.module, part, "an f-string field that is not a string or integer constant")
            parts.append(str(value))
        return "".join(parts)

    def _sequence(self, value: Any, node: cst.CSTNode, frame: Frame) -> list[Any]:
        if isinstance(value, (list, tuple)):
            return list(value)
        raise Unknown(frame.module, node, "a splat of something that is not a list or tuple")

    def _attribute(self, node: cst.Attribute, frame: Frame) -> Any:
        base_node = node.value
        if type(base_node) is cst.Name and base_node.value in ("cls", "self") and frame.cls is not None and base_node.value not in frame.locals:
            return self.class_attribute(frame.cls, node.attr.value, node, frame.module)
        base = self.eval(base_node, frame)
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
                    args[arg.keyword.value] = self.eval(arg.value, frame)
                elif index < len(positional):
                    args[positional[index]] = self.eval(arg.value, frame)
                else:
                    raise Unknown(frame.module, arg, f"a positional argument to {name}()")
            return Record(name, args, frame.module, node)
        target = self.eval(node.func, frame)
        positional_values = []
        keywords: dict[str, Any] = {}
        for arg in node.args:
            if arg.star:
                raise Unknown(frame.module, arg, "a * or ** argument")
            value = self.eval(arg.value, frame)
            if arg.keyword is not None:
                keywords[arg.keyword.value] = value
            else:
                positional_values.append(value)
        return self.call(target, positional_values, keywords, frame, node)

    def call(self, target: Any, args: list[Any], kwargs: dict[str, Any], frame: Frame, node: cst.CSTNode) -> Any:
        if isinstance(target, _Builtin):
            if len(args) != 1 or kwargs:
                raise Unknown(frame.module, node, f"{target.name}() with other than one argument")
            return list(self._sequence(args[0], node, frame)) if target.name == "list" else tuple(self._sequence(args[0], node, frame))
        if isinstance(target, _Lambda):
            return self.eval(target.node.body, Frame(target.frame.module, {**target.frame.locals, **_bind(target.node.params, args, kwargs)}, target.frame.cls))
        cls = None
        if isinstance(target, _Bound):
            target, cls = target.func, target.cls
        if isinstance(target, FuncSym):
            return self.run_function(target.key, args, kwargs, cls, node, frame)
        raise Unknown(frame.module, node, "a call of something that is not a helper function of the tree")

    # -- helper functions ---------------------------------------------------------------

    def run_function(self, key: FuncKey, args: list[Any], kwargs: dict[str, Any], cls: ClassKey | None, node: cst.CSTNode, caller: Frame) -> Any:
        func = self.project.function(key)
        module = self.project.module(key.module)
        if func is None or module is None:
            raise Unknown(caller.module, node, f"{key.qualname} cannot be read")
        params = func.node.params
        frame = Frame(module, _bind(params, args, kwargs, skip_first=func.kind in ("method", "classmethod")), cls or func.cls)
        for statement in block_statements(func.node.body):
            kind = type(statement)
            if kind is cst.Expr and type(statement.value) in (cst.SimpleString, cst.ConcatenatedString):  # type: ignore[attr-defined]
                continue  # docstring
            if kind is cst.Return:
                return None if statement.value is None else self.eval(statement.value, frame)  # type: ignore[attr-defined]
            if kind is cst.Assign and all(type(t.target) is cst.Name for t in statement.targets):  # type: ignore[attr-defined]
                value = self.eval(statement.value, frame)  # type: ignore[attr-defined]
                for target in statement.targets:  # type: ignore[attr-defined]
                    frame.locals[target.target.value] = value
                continue
            if kind is cst.AnnAssign and type(statement.target) is cst.Name and statement.value is not None:  # type: ignore[attr-defined]
                frame.locals[statement.target.value] = self.eval(statement.value, frame)  # type: ignore[attr-defined]
                continue
            if kind is cst.AugAssign and type(statement.target) is cst.Name and type(statement.operator) is cst.AddAssign:  # type: ignore[attr-defined]
                current = frame.locals.get(statement.target.value)  # type: ignore[attr-defined]
                added = self.eval(statement.value, frame)  # type: ignore[attr-defined]
                if isinstance(current, list) and isinstance(added, (list, tuple)):
                    current.extend(added)
                    continue
            if kind is cst.Expr and type(statement.value) is cst.Call:  # type: ignore[attr-defined]
                call = statement.value  # type: ignore[attr-defined]
                func_node = call.func
                if type(func_node) is cst.Attribute and type(func_node.value) is cst.Name and func_node.attr.value in ("append", "extend"):
                    current = frame.locals.get(func_node.value.value)
                    if isinstance(current, list) and len(call.args) == 1 and not call.args[0].star and call.args[0].keyword is None:
                        value = self.eval(call.args[0].value, frame)
                        if func_node.attr.value == "append":
                            current.append(value)
                        else:
                            current.extend(self._sequence(value, call, frame))
                        continue
            raise Unknown(module, statement, f"a statement of {key.qualname} that is not straight-line list building")
        raise Unknown(module, func.node, f"{key.qualname} returns nothing")


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


def _bind(params: cst.Parameters, args: list[Any], kwargs: dict[str, Any], skip_first: bool = False) -> dict[str, Any]:
    names = [p.name.value for p in (*params.posonly_params, *params.params)][1 if skip_first else 0 :]
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound
