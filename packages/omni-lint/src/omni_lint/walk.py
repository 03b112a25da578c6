"""A read-only traversal of libcst trees.

``CSTNode.visit`` rebuilds every node it passes through (it is designed for
transformers), which made a lint of the omni-models tree take seconds. The
linter never changes a tree, so it walks the dataclass fields directly and
skips the whitespace and punctuation fields that can never hold a name.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import libcst as cst

_SKIP_FIELD_PARTS = ("whitespace", "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after", "header", "footer", "newline", "indent")
_FIELDS: dict[type, tuple[str, ...]] = {}


class Visitor(Protocol):
    def on_visit(self, node: cst.CSTNode) -> bool: ...

    def on_leave(self, original_node: cst.CSTNode) -> None: ...


def _fields(kind: type) -> tuple[str, ...]:
    names = _FIELDS.get(kind)
    if names is None:
        names = tuple(
            f.name for f in dataclasses.fields(kind) if not any(part in f.name for part in _SKIP_FIELD_PARTS)
        )
        _FIELDS[kind] = names
    return names


_IS_NODE: dict[type, bool] = {}


def is_node(value: object) -> bool:
    """``isinstance(value, CSTNode)`` without the ABC machinery on every call."""
    kind = type(value)
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = isinstance(value, cst.CSTNode)
    return known


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    for name in _fields(type(node)):
        value = getattr(node, name)
        kind = type(value)
        if kind is list or kind is tuple:
            found.extend(item for item in value if is_node(item))
        elif is_node(value):
            found.append(value)
    return found


def walk(node: cst.CSTNode, visitor: Visitor) -> None:
    """Depth-first: ``on_visit`` (False skips the children), children, ``on_leave``.

    Iterative, so a valid module with a 1,000-long attribute chain or sum (a tree that deep)
    needs no Python stack. A node wrapped in a 1-tuple on the stack means "leave it"."""
    on_visit, on_leave = visitor.on_visit, visitor.on_leave
    fields, known = _FIELDS, _IS_NODE
    stack: list = [node]
    pop, push = stack.pop, stack.append
    while stack:
        current = pop()
        if type(current) is tuple:
            on_leave(current[0])
            continue
        push((current,))
        if not on_visit(current):
            continue
        kind = type(current)
        names = fields.get(kind)
        if names is None:
            names = _fields(kind)
        found = []
        for name in names:
            value = getattr(current, name)
            vkind = type(value)
            if vkind is list or vkind is tuple:
                for item in value:
                    ikind = type(item)
                    flag = known.get(ikind)
                    if flag is None:
                        flag = is_node(item)
                    if flag:
                        found.append(item)
            else:
                flag = known.get(vkind)
                if flag is None:
                    flag = is_node(value)
                if flag:
                    found.append(value)
        found.reverse()
        stack.extend(found)
