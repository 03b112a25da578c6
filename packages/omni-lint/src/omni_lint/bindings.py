"""Syntax-level facts of one block: the statements it runs and the names it binds.

Shared by the per-module scan (:mod:`omni_lint.scan`), the analyzer and the
contract evaluator; nothing here resolves a name across modules.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .walk import walk

_SCOPE_TYPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})
_BINDING_TYPES = frozenset({
    cst.Global, cst.Nonlocal, cst.Import, cst.ImportFrom, cst.Assign, cst.AssignTarget, cst.AugAssign,
    cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.AsName, cst.Return,
})


class Bindings:
    """Names a function body declares global and names it assigns (not nested scopes)."""

    def __init__(self) -> None:
        self.globals: dict[str, cst.CSTNode] = {}
        self.nonlocals: set[str] = set()
        self.assigned: set[str] = set()
        #: how many binding sites each name has
        self.counts: dict[str, int] = {}
        self.imports: list[cst.Import | cst.ImportFrom] = []
        #: simple ``name = value`` assignments: candidate aliases of module state
        self.values: dict[str, list[cst.BaseExpression]] = {}
        #: ``obj.attr = value`` assignments as (obj name, attr, value): ``self.queue = _QUEUE``
        self.attribute_values: list[tuple[str, str, cst.BaseExpression]] = []
        #: values of ``return`` statements
        self.returns: list[cst.BaseExpression] = []
        self._depth = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        nested = self._depth > 0 and kind in _SCOPE_TYPES
        self._depth += 1
        if nested or kind not in _BINDING_TYPES:
            return not nested
        if kind is cst.Global:
            for item in node.names:  # type: ignore[attr-defined]
                self.globals.setdefault(item.name.value, node)
        elif kind is cst.Nonlocal:
            for item in node.names:  # type: ignore[attr-defined]
                self.nonlocals.add(item.name.value)
        elif kind is cst.Import or kind is cst.ImportFrom:
            self.imports.append(node)  # type: ignore[arg-type]
        elif kind is cst.Assign:
            for target in node.targets:  # type: ignore[attr-defined]
                t = target.target
                if type(t) is cst.Name:
                    self.values.setdefault(t.value, []).append(node.value)  # type: ignore[attr-defined]
                elif type(t) is cst.Attribute and type(t.value) is cst.Name:
                    self.attribute_values.append((t.value.value, t.attr.value, node.value))  # type: ignore[attr-defined]
        elif kind is cst.Return:
            if node.value is not None:  # type: ignore[attr-defined]
                self.returns.append(node.value)  # type: ignore[attr-defined]
        elif kind is cst.AssignTarget:
            self._targets(node.target)  # type: ignore[attr-defined]
        elif kind is cst.AugAssign or (kind is cst.AnnAssign and node.value is not None):  # type: ignore[attr-defined]
            self._targets(node.target)  # type: ignore[attr-defined]
            if kind is cst.AnnAssign and type(node.target) is cst.Name:  # type: ignore[attr-defined]
                self.values.setdefault(node.target.value, []).append(node.value)  # type: ignore[attr-defined]
        elif kind is cst.For or kind is cst.CompFor or kind is cst.NamedExpr:
            self._targets(node.target)  # type: ignore[attr-defined]
        elif kind is cst.AsName:
            self._targets(node.name)  # type: ignore[attr-defined]
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._depth -= 1

    def _targets(self, target: cst.BaseExpression) -> None:
        if type(target) is cst.Name:
            self.assigned.add(target.value)
            self.counts[target.value] = self.counts.get(target.value, 0) + 1
        elif type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self._targets(element.value)
        elif type(target) is cst.StarredElement:
            self._targets(target.value)


def function_bindings(node: cst.FunctionDef) -> Bindings:
    visitor = Bindings()
    visitor._depth = 1  # defs inside the body are nested scopes
    walk(node.body, visitor)
    return visitor


def compound_bodies(statement: cst.CSTNode) -> Iterator[cst.BaseSuite]:
    for attr in ("body", "orelse", "finalbody"):
        child = getattr(statement, attr, None)
        if isinstance(child, cst.BaseSuite):
            yield child
        elif type(child) in (cst.Else, cst.Finally, cst.If):
            if type(child) is cst.If:
                yield from compound_bodies(child)
            else:
                yield child.body
    for handler in getattr(statement, "handlers", ()) or ():
        yield handler.body


def block_statements(suite: cst.BaseSuite | cst.Module) -> Iterator[cst.CSTNode]:
    """Statements of a block, descending into if/try/with/for/while blocks (not defs)."""
    body = suite.body
    if isinstance(body, (list, tuple)):
        items = body
    else:
        items = [body]
    for statement in items:
        if type(statement) is cst.SimpleStatementLine:
            yield from statement.body
        elif type(statement) is cst.SimpleStatementSuite:
            yield from statement.body
        elif type(statement) in (cst.FunctionDef, cst.ClassDef):
            yield statement
        elif isinstance(statement, cst.BaseCompoundStatement):
            for sub in compound_bodies(statement):
                yield from block_statements(sub)
        elif isinstance(statement, cst.BaseSmallStatement):
            yield statement


def assign_pairs(statement: cst.CSTNode) -> Iterator[tuple[str, cst.BaseExpression | None, cst.CSTNode]]:
    if type(statement) is cst.Assign:
        for target in statement.targets:
            if type(target.target) is cst.Name:
                yield target.target.value, statement.value, target.target
    elif type(statement) is cst.AnnAssign and type(statement.target) is cst.Name:
        yield statement.target.value, statement.value, statement.target




class NameFinder:
    """Whether a subtree names any of ``names`` (stops at the first)."""

    def __init__(self, names: set[str]):
        self.names = names
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) is cst.Name and node.value in self.names:  # type: ignore[attr-defined]
            self.found = True
        return not self.found

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass


class SelfAssigns:
    """Collects ``X`` of ``self.X = ...`` targets in one method body."""

    def __init__(self, self_name: str, names: set[str]):
        self.self_name = self_name
        self.names = names

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        if kind is cst.AssignTarget or kind is cst.AnnAssign or kind is cst.AugAssign:
            target = node.target  # type: ignore[attr-defined]
            if type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == self.self_name:
                self.names.add(target.attr.value)
        return kind is not cst.FunctionDef and kind is not cst.ClassDef

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass
