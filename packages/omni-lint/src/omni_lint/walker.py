"""Classify every use of a state inside one function body: a write, a read, a cache.

The walk keeps the stack of enclosing nodes, so each reference is judged by
its context: a subscript store (also nested, ``X["k"][rid] = v``), ``del``,
a mutating or consuming method, rebinding after ``global``, an argument to a
function of the tree (what the callee does to that parameter), a plain read.
A function that probes a state, fills it on a miss and returns the value is a
get-or-load cache: its accesses are marked ``cache`` and never make a handoff.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

import libcst as cst

from .bindings import NameFinder
from .facts import Access, AccessKey, Facts, Scope
from .project import Project
from .scan import ClassKey, FuncKey, StateKey
from .source import ParsedFile
from .symbols import ClassSelfSym, ClassSym, FuncSym, InstanceSym, ParamKey, ParamSym, SelfAttrSym, SelfKey, StateSym, SuperSym, Sym
from .verbs import CONSUME, FILL, WRITE, container_effect
from .walk import walk


class Analyzer(Protocol):
    """What a :class:`FunctionWalker` asks of the :class:`~omni_lint.analyzer.Analyzer` that runs it.

    A protocol, not an import of :mod:`.analyzer`: the analyzer creates walkers, so
    importing it back (even for types) would tie the two modules in a cycle.
    """

    project: Project

    def resolve_name(self, scope: Scope, name: str, guard: frozenset = ...) -> Sym | None: ...
    def resolve_value(self, scope: Scope, expr: cst.BaseExpression, guard: frozenset = ...) -> Sym | None: ...
    def dynamic_target(self, scope: Scope, call: cst.Call, guard: frozenset = ...) -> tuple[Sym | None, bool] | None: ...
    def modules_subscript(self, scope: Scope, node: cst.Subscript) -> tuple[Sym | None, bool] | None: ...
    def returns_state(self, key: FuncKey) -> StateKey | None: ...
    def self_alias(self, key: SelfKey) -> StateKey | None: ...
    def param_effect(self, key: ParamKey) -> frozenset[str]: ...
    def param_verbs(self, key: ParamKey) -> frozenset[str]: ...
    def call_effect(self, key: AccessKey, verb: str, reaches: set) -> tuple[str, ...]: ...

_SCOPE_TYPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})
#: subtrees that never run code in the function: nested scopes (followed on their own) and annotations
_SKIP_TYPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Annotation})


_SKIP_PARENTS = frozenset({cst.ImportAlias, cst.ImportFrom, cst.NameItem, cst.AsName, cst.FunctionDef, cst.ClassDef})


class FunctionWalker:
    def __init__(self, analyzer: Analyzer, scope: Scope, parsed: ParsedFile):
        self.an = analyzer
        self.scope = scope
        self.parsed = parsed
        self.path = str(parsed.path)
        self.stack: list[cst.CSTNode] = []
        self.raw: dict[AccessKey, list[tuple[str, cst.CSTNode, str, bool]]] = defaultdict(list)
        self.reaches: set[FuncKey | ClassKey] = set()
        self.self_calls: set[FuncKey] = set()
        self.verbs: set[tuple[SelfKey | ParamKey, str]] = set()
        self.cache_vars: dict[AccessKey, set[str]] = defaultdict(set)
        self.returned: set[AccessKey] = set()
        #: states read outside an ``if`` test (the value is used, not only probed)
        self.used: set[AccessKey] = set()
        self.return_names: set[str] = set()
        #: functions (and constructors) this body calls while it runs (not inside a lambda)
        self.calls: set[FuncKey] = set()
        #: dynamic imports / getattr with a computed name: calls the analysis cannot follow
        self.unresolved: list[cst.Call] = []
        #: states written only on a miss of a lookup into a variable (get-or-compute)
        self.miss_fills: set[AccessKey] = set()

    # -- traversal ---------------------------------------------------------------

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        nested = kind in _SKIP_TYPES and bool(self.stack)
        self.stack.append(node)
        if nested:
            return False
        if kind is cst.Name:
            self._name(node)  # type: ignore[arg-type]
        elif kind is cst.Call:
            self._call(node)  # type: ignore[arg-type]
        elif kind is cst.Subscript:
            self._modules_subscript(node)  # type: ignore[arg-type]
        elif kind is cst.Return and type(node.value) is cst.Name:  # type: ignore[attr-defined]
            self.return_names.add(node.value.value)  # type: ignore[attr-defined]
        elif kind is cst.Assign:
            self._derive_cache_vars(node)  # type: ignore[arg-type]
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()

    def finish(self) -> Facts:
        accesses = []
        for key, raw in self.raw.items():
            kinds = {kind for kind, _, _, _ in raw}
            get_or_load = (
                "read" in kinds
                and "fill" in kinds
                and "write" not in kinds
                and (key in self.returned or bool(self.cache_vars[key] & self.return_names))
            )
            lazy_init = "gfill" in kinds and not kinds & {"write", "fill"} and key in self.used
            get_or_compute = key in self.miss_fills and "read" in kinds and all(
                kind != "write" or any(k2 == "read" and n2 is node for k2, n2, _, _ in raw) for kind, node, _, _ in raw
            )
            cache = get_or_load or lazy_init or get_or_compute
            seen = set()
            for kind, node, form, deferred in raw:
                final = "cache" if cache and kind != "cache" else ("write" if kind in ("fill", "gfill") else kind)
                if (final, id(node)) in seen:
                    continue
                seen.add((final, id(node)))
                accesses.append(Access(key, final, self.parsed, node, self.scope.func.cls is not None, form, deferred))
        reaches = set(self.reaches) | set(self.scope.func.nested)
        verbs = tuple(sorted(self.verbs, key=repr))
        unresolved = tuple((self.parsed, node) for node in self.unresolved)
        return Facts(tuple(accesses), tuple(sorted(reaches, key=repr)), tuple(sorted(self.self_calls)), verbs, unresolved, tuple(sorted(self.calls)))

    # -- references ----------------------------------------------------------------

    def _parent(self, index: int) -> cst.CSTNode | None:
        return self.stack[index - 1] if index > 0 else None

    def _name(self, node: cst.Name) -> None:
        parent = self._parent(len(self.stack) - 1)
        if parent is None or type(parent) in _SKIP_PARENTS:
            return
        if type(parent) is cst.Attribute and parent.attr is node:
            return
        if type(parent) is cst.Param and parent.name is node:
            return
        if type(parent) is cst.Arg and parent.keyword is node:
            return
        index = len(self.stack) - 1
        if self._store_context(index) is not None and not self._declared_global(node.value):
            return  # binding a local name (even one that aliased a state) never writes module state
        sym = self.an.resolve_name(self.scope, node.value)
        if sym is not None:
            self._follow(sym, index)

    def _declared_global(self, name: str) -> bool:
        return name in self.scope.globals

    def _call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Name and node.func.value == "super" and isinstance(self.scope.self_sym, (InstanceSym, ClassSelfSym)):
            self._follow(SuperSym(self.scope.self_sym.cls), len(self.stack) - 1)
            return
        dynamic = self.an.dynamic_target(self.scope, node)
        if dynamic is not None:
            sym, unresolved = dynamic
            if sym is not None:
                self._follow(sym, len(self.stack) - 1)
            elif unresolved:
                self.unresolved.append(node)

    def _modules_subscript(self, node: cst.Subscript) -> None:
        dynamic = self.an.modules_subscript(self.scope, node)
        if dynamic is not None:
            sym, unresolved = dynamic
            if sym is not None:
                self._follow(sym, len(self.stack) - 1)
            elif unresolved:
                self.unresolved.append(node)  # type: ignore[arg-type]

    def _follow(self, sym: Sym, index: int) -> None:
        from_self = isinstance(sym, (InstanceSym, ClassSelfSym, SuperSym))
        current: Sym | None = sym
        while not isinstance(current, (StateSym, SelfAttrSym, ParamSym)):
            parent = self._parent(index)
            if type(parent) is cst.Attribute and parent.value is self.stack[index]:
                current = self.an.project.member(current, parent.attr.value)
                index -= 1
                if current is None:
                    return
            else:
                break
        if isinstance(current, StateSym):
            self._state_use(current.key, index)
        elif isinstance(current, SelfAttrSym):
            aliased = self.an.self_alias(current.key)
            self._state_use(aliased if aliased is not None else current.key, index)
        elif isinstance(current, ParamSym):
            self._state_use(current.key, index)
        elif isinstance(current, FuncSym):
            self.reaches.add(current.key)
            parent = self._parent(index)
            if type(parent) is cst.Call and parent.func is self.stack[index]:
                if not self._deferred():
                    self.calls.add(current.key)
                if from_self:
                    self.self_calls.add(current.key)
                state = self.an.returns_state(current.key)
                if state is not None:
                    self._state_use(state, index - 1)
        elif isinstance(current, ClassSym):
            self.reaches.add(current.key)
            parent = self._parent(index)
            if type(parent) is cst.Call and parent.func is self.stack[index] and not self._deferred():
                init = self.an.project.class_member(current.key, "__init__")
                if isinstance(init, FuncSym):
                    self.calls.add(init.key)

    def _deferred(self) -> bool:
        """Inside a lambda: runs when the lambda is called, not when this function runs."""
        return any(type(n) is cst.Lambda for n in self.stack)

    # -- classification ------------------------------------------------------------

    def _state_use(self, key: AccessKey, index: int) -> None:
        stack = self.stack
        head = stack[index]
        attrs: list[str] = []
        while index > 0 and type(stack[index - 1]) is cst.Attribute and stack[index - 1].value is stack[index]:
            attrs.append(stack[index - 1].attr.value)  # type: ignore[attr-defined]
            index -= 1
        node = stack[index]
        parent = self._parent(index)
        kinds: tuple[str, ...]
        form = "name"
        if attrs and type(parent) is cst.Call and parent.func is node:
            verb = attrs[-1]
            form = f"call:{verb}"
            if len(attrs) == 1:
                kinds = self.an.call_effect(key, verb, self.reaches)
                if isinstance(key, (SelfKey, ParamKey)):
                    self.verbs.add((key, verb))
            else:
                kinds = container_effect("object", verb)
            if self._receiver_of_write(index - 1):
                kinds = (*kinds, "write")
            if "read" in kinds or "cache" in kinds:
                self._note_cache_var(key, index - 1)
        elif type(parent) is cst.Subscript and parent.value is node:
            kinds, form = self._subscript(key, index - 1)
            if attrs and "fill" in kinds:
                kinds = ("write",)
        elif type(parent) is cst.Call and parent.func is node:
            kinds = ("read",)
        elif not attrs and type(parent) is cst.Arg and parent.value is node and type(self._parent(index - 1)) is cst.Call:
            # passed to a function of the tree: what the callee does to that parameter (at least a read)
            kinds = ("read", *self._argument_effect(key, parent, self._parent(index - 1)))  # type: ignore[arg-type]
            form = "arg"  # what the callee will do with it, not a write made here
        else:
            context = self._store_context(index)
            if context == "store" and not attrs and self._guarded_by(index, head):
                kinds = ("gfill",)  # ``if X is None: X = build()``: a lazily initialised global
            elif context in ("store", "del") and not attrs and not isinstance(key, StateKey):
                kinds = ("rebind",)  # ``self.x = ...`` replaces what the attribute holds, it does not mutate it
            elif context in ("store", "del"):
                kinds = ("write",)
            elif context == "aug":
                kinds = ("read", "write")
            elif not attrs and self._is_alias_value(index):
                # ``cache = _CACHE`` / ``cache = shared_cache()`` binds a name, it reads nothing: each use
                # of the alias is resolved to the state where it happens (and judged there)
                kinds = ()
            elif len(attrs) == 1:
                # a method passed on (``callback=_QUEUE.put``) or an attribute read: the method's effect
                kinds = self.an.call_effect(key, attrs[0], self.reaches)
                if isinstance(key, (SelfKey, ParamKey)):
                    self.verbs.add((key, attrs[0]))
            else:
                kinds = ("read",)
        if any(type(n) is cst.Return for n in stack[:index]) and ("read" in kinds or "cache" in kinds):
            self.returned.add(key)
        if "read" in kinds:
            if not self._in_if_test(index):
                self.used.add(key)
            elif form in ("name", "subscript"):
                form = "probe"
        if "write" in kinds and "read" not in kinds and self._in_miss_branch(index, key):
            # ``v = CACHE.get(k)`` ... ``if v is None: v = compute(); CACHE.put(k, v)``: a miss recomputes
            kinds = tuple("fill" if kind == "write" else kind for kind in kinds)
            self.miss_fills.add(key)
        deferred = any(type(n) is cst.Lambda for n in stack)
        for kind in kinds:
            self.raw[key].append((kind, head, form, deferred))

    def _argument_effect(self, key: AccessKey, arg: cst.Arg, call: cst.Call) -> tuple[str, ...]:
        """What the called function (or constructor) does to the argument ``key`` it is given."""
        if arg.star:
            return ()
        target = self.an.resolve_value(self.scope, call.func)
        callee: FuncKey | None = None
        skip_first = False
        if isinstance(target, ClassSym):
            init = self.an.project.class_member(target.key, "__init__")
            if isinstance(init, FuncSym):
                callee, skip_first = init.key, True
        elif isinstance(target, FuncSym):
            callee = target.key
            func = self.an.project.function(callee)
            skip_first = func is not None and func.kind in ("method", "classmethod")
        if callee is None:
            return ()
        func = self.an.project.function(callee)
        if func is None:
            return ()
        if arg.keyword is not None:
            name = arg.keyword.value
        else:
            position = [a for a in call.args if a.keyword is None and not a.star].index(arg)
            params = [p.name.value for p in (*func.node.params.posonly_params, *func.node.params.params)]
            if skip_first:
                params = params[1:]
            if position >= len(params):
                return ()
            name = params[position]
        param = ParamKey(callee, name)
        kinds = set(self.an.param_effect(param))
        for verb in self.an.param_verbs(param):
            if isinstance(key, StateKey):
                # the argument's class is known here: its method bodies say what each call does
                kinds.update(self.an.call_effect(key, verb, self.reaches))
            else:
                self.verbs.add((key, verb))  # still unknown: our own caller resolves it
        return tuple(sorted(kinds))

    def _in_if_test(self, index: int) -> bool:
        stack = self.stack
        return any(type(stack[i]) is cst.If and stack[i + 1] is stack[i].test for i in range(index))  # type: ignore[attr-defined]

    def _in_miss_branch(self, index: int, key: AccessKey) -> bool:
        """True inside the body of an ``if`` that tests a variable read from the same state (a miss)."""
        return self._in_if_body_naming(index, self.cache_vars.get(key) or set())

    def _guarded_by(self, index: int, head: cst.CSTNode) -> bool:
        """True when the node sits in the body of an ``if`` whose test names ``head`` (a Name)."""
        return type(head) is cst.Name and self._in_if_body_naming(index, {head.value})  # type: ignore[attr-defined]

    def _in_if_body_naming(self, index: int, names: set[str]) -> bool:
        stack = self.stack
        for i in range(index if names else 0):
            if type(stack[i]) is cst.If and stack[i + 1] is not stack[i].test:  # type: ignore[attr-defined]
                finder = NameFinder(names)
                walk(stack[i].test, finder)  # type: ignore[attr-defined]
                if finder.found:
                    return True
        return False

    def _subscript(self, key: AccessKey, index: int) -> tuple[tuple[str, ...], str]:
        outer = index
        while type(self._parent(outer)) is cst.Subscript and self._parent(outer).value is self.stack[outer]:  # type: ignore[union-attr]
            outer -= 1  # ``X["k"][rid] = v``: the store lands in a container X holds, a write of X
        context = self._store_context(outer)
        if outer != index:
            if context in ("store", "del"):
                return ("write",), "store"
            if context == "aug":
                return ("read", "write"), "aug"
            return (("read", "write") if self._receiver_of_write(outer) else ("read",)), "subscript"
        if context == "store":
            assign = self._parent(index - 1) if type(self._parent(index)) is cst.AssignTarget else None
            if type(assign) is cst.Assign:
                for target in assign.targets:
                    if type(target.target) is cst.Name:
                        self.cache_vars[key].add(target.target.value)
                if type(assign.value) is cst.Name:
                    self.cache_vars[key].add(assign.value.value)
            return ("fill",), "store"
        if context == "del":
            return ("write",), "del"
        if context == "aug":
            return ("read", "write"), "aug"
        kinds: tuple[str, ...] = ("read",)
        if self._receiver_of_write(index):
            kinds = ("read", "write")
        self._note_cache_var(key, index)
        return kinds, "subscript"

    def _store_context(self, index: int) -> str | None:
        node = self.stack[index]
        parent = self._parent(index)
        if type(parent) in (cst.AssignTarget, cst.For, cst.CompFor) and parent.target is node:
            return "store"
        if type(parent) is cst.AnnAssign and parent.target is node:
            return "store" if parent.value is not None else None
        if type(parent) is cst.AugAssign and parent.target is node:
            return "aug"
        if type(parent) is cst.Del and parent.target is node:
            return "del"
        if type(parent) in (cst.Element, cst.StarredElement) and parent.value is node:
            grand = self._parent(index - 1)
            if type(grand) in (cst.Tuple, cst.List):
                return self._store_context(index - 2)
        return None

    def _is_alias_value(self, index: int) -> bool:
        """``name = STATE`` or ``self.attr = STATE``: an alias, followed where it is used."""
        parent = self._parent(index)
        return (
            type(parent) is cst.Assign
            and parent.value is self.stack[index]
            and all(
                type(target.target) is cst.Name
                or (
                    type(target.target) is cst.Attribute
                    and type(target.target.value) is cst.Name
                    and target.target.value.value == self.scope.self_name
                )
                for target in parent.targets
            )
        )

    def _receiver_of_write(self, index: int) -> bool:
        if index < 2:
            return False
        node, parent, grand = self.stack[index], self.stack[index - 1], self.stack[index - 2]
        return (
            type(parent) is cst.Attribute
            and parent.value is node
            and type(grand) is cst.Call
            and grand.func is parent
            and parent.attr.value in (WRITE | FILL | CONSUME)
        )

    def _derive_cache_vars(self, assign: cst.Assign) -> None:
        """``waveform, tag = hit`` or ``value = hit.clone()`` after ``hit = CACHE.get(k)``: the targets
        carry what the lookup found, so ``if waveform is None: ... CACHE.put(k, ...)`` is a miss too."""
        for names in self.cache_vars.values():
            if not names:
                continue
            finder = NameFinder(names)
            walk(assign.value, finder)
            if finder.found:
                for target in assign.targets:
                    names.update(_target_names(target.target))

    def _note_cache_var(self, key: AccessKey, index: int) -> None:
        node = self.stack[index]
        parent = self._parent(index)
        if type(parent) is cst.Assign and parent.value is node:
            for target in parent.targets:
                if type(target.target) is cst.Name:
                    self.cache_vars[key].add(target.target.value)
        elif type(parent) is cst.NamedExpr and parent.value is node and type(parent.target) is cst.Name:
            self.cache_vars[key].add(parent.target.value)


def _target_names(target: cst.BaseExpression) -> set[str]:
    """The names an assignment target binds (``a``, ``a, b``, ``[a, *rest]``)."""
    if type(target) is cst.Name:
        return {target.value}  # type: ignore[attr-defined]
    if type(target) in (cst.Tuple, cst.List):
        return {name for element in target.elements for name in _target_names(element.value)}  # type: ignore[attr-defined]
    return set()
