"""What one function does: which state it reads or writes, what it reaches.

A function body is walked once (memoised): each reference is resolved through
the function's own scope, its enclosing functions (closures) and its module,
then classified by how it is used (subscript store, ``del``, a mutating or
consuming method, rebinding after ``global``, a plain read). A function that
probes a state, fills it on a miss and returns the value is a get-or-load
cache: its accesses are marked ``cache`` and never make a handoff.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import libcst as cst

from .project import (
    ClassSelfSym,
    ClassSym,
    FuncSym,
    InstanceSym,
    ParamKey,
    ParamSym,
    Project,
    SelfAttrSym,
    SelfKey,
    StateSym,
    SuperSym,
    Sym,
)
from .scan import ClassKey, FuncInfo, FuncKey, ImportBinding, ModuleInfo, StateKey, import_bindings
from .source import ParsedFile
from .verbs import CONSUME, FILL, WRITE, container_effect, guess_kind
from .walk import walk

AccessKey = StateKey | SelfKey | ParamKey


@dataclass(frozen=True)
class Access:
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

    @property
    def path(self) -> str:
        return str(self.parsed.path)

    @property
    def line(self) -> int:
        return self.parsed.position(self.node)[0]

    @property
    def col(self) -> int:
        return self.parsed.position(self.node)[1]


@dataclass(frozen=True)
class Facts:
    accesses: tuple[Access, ...] = ()
    reaches: tuple[FuncKey | ClassKey, ...] = ()
    self_calls: tuple[FuncKey, ...] = ()
    #: methods called on a parameter or a ``self`` attribute (``self.box.stash(...)``): the object is
    #: not known here, so the caller resolves the verbs against the class of what it passes in
    verbs: tuple[tuple[SelfKey | ParamKey, str], ...] = ()


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


def _param_names(params: cst.Parameters) -> list[str]:
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param:
            names.append(star.name.value)
    return names


class Analyzer:
    """Per-import-root memo of function facts, scopes and registry summaries."""

    def __init__(self, project: Project):
        self.project = project
        self._facts: dict[FuncKey, Facts] = {}
        self._in_progress: set[FuncKey] = set()
        self._scopes: dict[FuncKey, Scope | None] = {}
        self._returns: dict[FuncKey, StateKey | None] = {}
        self._returns_busy: set[FuncKey] = set()
        self._effects: dict[FuncKey, frozenset[str]] = {}
        self._self_aliases: dict[ClassKey, dict[str, StateKey]] = {}
        self._param_effects: dict[ParamKey, frozenset[str]] = {}
        self._param_verbs: dict[ParamKey, frozenset[str]] = {}

    # -- scopes and names ------------------------------------------------------

    def scope(self, key: FuncKey) -> Scope | None:
        if key in self._scopes:
            return self._scopes[key]
        func = self.project.function(key)
        module = self.project.module(key.module)
        if func is None or module is None:
            self._scopes[key] = None
            return None
        bindings = func.bindings
        params = _param_names(func.node.params)
        imports: dict[str, ImportBinding] = {}
        for node in bindings.imports:
            for bound, binding in import_bindings(module, node):
                imports[bound] = binding
        defs = {nested.qualname.rpartition(".")[2]: nested for nested in func.nested}
        parent = self.scope(func.parent) if func.parent is not None else None
        scope = Scope(
            func=func,
            module=module,
            parent=parent,
            locals=frozenset(params) | frozenset(bindings.assigned) | frozenset(defs) | frozenset(imports),
            globals=frozenset(bindings.globals),
            nonlocals=frozenset(bindings.nonlocals),
            imports=imports,
            defs=defs,
            values=bindings.values,
            params=frozenset(params),
            bindings=bindings.counts,
        )
        if func.cls is not None and func.kind in ("method", "classmethod") and params:
            scope.self_name = params[0]
            scope.self_sym = InstanceSym(func.cls) if func.kind == "method" else ClassSelfSym(func.cls)
        self._scopes[key] = scope
        return scope

    def resolve_name(self, scope: Scope, name: str, guard: frozenset = frozenset()) -> Sym | None:
        current: Scope | None = scope
        while current is not None:
            if name in current.globals:
                return self.project.global_name(current.module, name)
            if name in current.imports:
                return self.project.resolve_import(current.imports[name])
            if name in current.defs:
                key = current.defs[name]
                return FuncSym(key) if isinstance(key, FuncKey) else ClassSym(key)
            if name == current.self_name:
                return current.self_sym
            if name in current.params and not current.bindings.get(name):
                return ParamSym(ParamKey(current.func.key, name))
            if name in current.locals and name not in current.nonlocals:
                marker = (current.func.key, name)
                if marker in guard:
                    return None
                # an alias only when every binding of the local is the same state (flow-insensitive,
                # so ``x = STATE; x = dict(x)`` is not one; ``param = param or STATE`` still is)
                values = current.values.get(name, ())
                if not values or len(values) != current.bindings.get(name, 0):
                    return None
                found = {self.resolve_value(current, value, guard | {marker}) for value in values}
                if len(found) == 1:
                    (sym,) = found
                    if isinstance(sym, StateSym):
                        return sym
                return None
            current = current.parent
        return self.project.global_name(scope.module, name)

    def resolve_value(self, scope: Scope, expr: cst.BaseExpression, guard: frozenset = frozenset()) -> Sym | None:
        """Pure resolution of an expression to a symbol (records nothing)."""
        if type(expr) is cst.Name:
            return self.resolve_name(scope, expr.value, guard)
        if type(expr) is cst.Attribute:
            base = self.resolve_value(scope, expr.value, guard)
            if base is None:
                return None
            if isinstance(base, StateSym):
                return base
            return self.project.member(base, expr.attr.value)
        if type(expr) is cst.Call:
            if type(expr.func) is cst.Name and expr.func.value == "super" and isinstance(scope.self_sym, (InstanceSym, ClassSelfSym)):
                return SuperSym(scope.self_sym.cls)
            target = self.resolve_value(scope, expr.func, guard)
            if isinstance(target, FuncSym):
                state = self.returns_state(target.key)
                return StateSym(state) if state is not None else None
        return None

    def returns_state(self, key: FuncKey) -> StateKey | None:
        """The module state a function returns as is (an accessor such as ``get_queue()``)."""
        if key in self._returns:
            return self._returns[key]
        if key in self._returns_busy:
            return None
        self._returns_busy.add(key)
        found = None
        scope = self.scope(key)
        if scope is not None:
            for value in scope.func.bindings.returns:
                sym = self.resolve_value(scope, value)
                if isinstance(sym, StateSym):
                    found = sym.key
                    break
        self._returns_busy.discard(key)
        self._returns[key] = found
        return found

    # -- facts -------------------------------------------------------------------

    def facts(self, key: FuncKey) -> Facts:
        if key in self._facts:
            return self._facts[key]
        if key in self._in_progress:
            return Facts()
        scope = self.scope(key)
        if scope is None:
            self._facts[key] = Facts()
            return self._facts[key]
        self._in_progress.add(key)
        try:
            walker = _Walker(self, scope, scope.module.parsed)
            walk(scope.func.node.body, walker)
            result = walker.finish()
        finally:
            self._in_progress.discard(key)
        self._facts[key] = result
        return result

    def self_alias(self, key: SelfKey) -> StateKey | None:
        """The module state ``self.<attr>`` was set to in some method (``self.queue = _QUEUE``)."""
        aliases = self._self_aliases.get(key.cls)
        if aliases is None:
            aliases = self._self_aliases[key.cls] = {}
            for cls_key in self.project.mro(key.cls):
                klass = self.project.klass(cls_key)
                if klass is None:
                    continue
                for method in klass.methods.values():
                    scope = self.scope(method)
                    if scope is None or scope.self_name is None or scope.func.kind != "method":
                        continue
                    pairs = [(attr, value) for owner, attr, value in scope.func.bindings.attribute_values if owner == scope.self_name]
                    for attr, value in pairs:
                        sym = self.resolve_value(scope, value)
                        if isinstance(sym, StateSym):
                            aliases.setdefault(attr, sym.key)
        return aliases.get(key.attr)

    def _kept_on_self(self, key: ParamKey) -> list[tuple[Facts, set[str]]]:
        """For a constructor parameter kept on ``self`` (``self.box = box``): the facts of each
        effective method of the class, with the attributes that hold the argument."""
        func = self.project.function(key.func)
        scope = self.scope(key.func)
        if func is None or func.cls is None or func.node.name.value != "__init__" or scope is None or not scope.self_name:
            return []
        kept = {
            attr
            for owner, attr, value in func.bindings.attribute_values
            if owner == scope.self_name and type(value) is cst.Name and value.value == key.name
        }
        if not kept:
            return []
        return [(self.facts(method), kept) for method in self.project.effective_methods(func.cls)]

    def param_effect(self, key: ParamKey) -> frozenset[str]:
        """What a function does to one of its parameters: its own accesses, plus, for a constructor
        that keeps the argument on ``self``, what the class's methods do to that attribute."""
        if key in self._param_effects:
            return self._param_effects[key]
        self._param_effects[key] = frozenset()  # recursion guard
        facts = self.facts(key.func)
        kinds = {access.kind for access in facts.accesses if access.key == key and access.kind != "rebind"}
        for method_facts, kept in self._kept_on_self(key):
            for access in method_facts.accesses:
                if isinstance(access.key, SelfKey) and access.key.attr in kept and access.kind != "rebind":
                    kinds.add(access.kind)
        self._param_effects[key] = frozenset(kinds)
        return self._param_effects[key]

    def param_verbs(self, key: ParamKey) -> frozenset[str]:
        """The methods called on a parameter, directly or (for a constructor) on the ``self`` attribute
        that keeps it: the caller resolves them against the class of its argument."""
        if key in self._param_verbs:
            return self._param_verbs[key]
        self._param_verbs[key] = frozenset()  # recursion guard
        verbs = {verb for target, verb in self.facts(key.func).verbs if target == key}
        for method_facts, kept in self._kept_on_self(key):
            verbs.update(verb for target, verb in method_facts.verbs if isinstance(target, SelfKey) and target.attr in kept)
        self._param_verbs[key] = frozenset(verbs)
        return self._param_verbs[key]

    def method_effect(self, key: FuncKey) -> frozenset[str]:
        """How calling a registry method touches its instance's own attributes."""
        if key in self._effects:
            return self._effects[key]
        self._effects[key] = frozenset()  # recursion guard
        facts = self.facts(key)
        kinds = {"write" if access.kind == "rebind" else access.kind for access in facts.accesses if isinstance(access.key, SelfKey)}
        for callee in facts.self_calls:
            kinds |= self.method_effect(callee)
        self._effects[key] = frozenset(kinds)
        return self._effects[key]

    def call_effect(self, key: AccessKey, verb: str, reaches: set) -> tuple[str, ...]:
        if isinstance(key, (SelfKey, ParamKey)):
            return container_effect("object", verb)
        state = self.project.state(key)
        if state is None:
            return ("read",)
        if state.class_key is None:
            return container_effect(state.kind if state.kind not in ("global", "instance") else "object", verb)
        method = self.project.class_member(state.class_key, verb)
        if isinstance(method, FuncSym):
            reaches.add(method.key)
            return tuple(sorted(self.method_effect(method.key)))
        return container_effect(guess_kind(self.project.external_bases(state.class_key)), verb)


_SCOPE_TYPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})
#: subtrees that never run code in the function: nested scopes (followed on their own) and annotations
_SKIP_TYPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Annotation})


class _NameFinder:
    def __init__(self, name: str):
        self.name = name
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) is cst.Name and node.value == self.name:  # type: ignore[attr-defined]
            self.found = True
        return not self.found

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass


_SKIP_PARENTS = frozenset({cst.ImportAlias, cst.ImportFrom, cst.NameItem, cst.AsName, cst.FunctionDef, cst.ClassDef})


class _Walker:
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
        elif kind is cst.Return and type(node.value) is cst.Name:  # type: ignore[attr-defined]
            self.return_names.add(node.value.value)  # type: ignore[attr-defined]
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
            cache = get_or_load or lazy_init
            seen = set()
            for kind, node, form, deferred in raw:
                final = "cache" if cache and kind != "cache" else ("write" if kind in ("fill", "gfill") else kind)
                if (final, id(node)) in seen:
                    continue
                seen.add((final, id(node)))
                accesses.append(Access(key, final, self.parsed, node, self.scope.func.cls is not None, form, deferred))
        reaches = set(self.reaches) | set(self.scope.func.nested)
        verbs = tuple(sorted(self.verbs, key=repr))
        return Facts(tuple(accesses), tuple(sorted(reaches, key=repr)), tuple(sorted(self.self_calls)), verbs)

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
                if from_self:
                    self.self_calls.add(current.key)
                state = self.an.returns_state(current.key)
                if state is not None:
                    self._state_use(state, index - 1)
        elif isinstance(current, ClassSym):
            self.reaches.add(current.key)

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
                kinds = ("read",)
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

    def _guarded_by(self, index: int, head: cst.CSTNode) -> bool:
        """True when the node sits in the body of an ``if`` whose test names ``head`` (a Name)."""
        if type(head) is not cst.Name:
            return False
        name = head.value  # type: ignore[attr-defined]
        stack = self.stack
        for i in range(index):
            if type(stack[i]) is cst.If and stack[i + 1] is not stack[i].test:  # type: ignore[attr-defined]
                finder = _NameFinder(name)
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

    def _note_cache_var(self, key: AccessKey, index: int) -> None:
        node = self.stack[index]
        parent = self._parent(index)
        if type(parent) is cst.Assign and parent.value is node:
            for target in parent.targets:
                if type(target.target) is cst.Name:
                    self.cache_vars[key].add(target.target.value)
        elif type(parent) is cst.NamedExpr and parent.value is node and type(parent.target) is cst.Name:
            self.cache_vars[key].add(parent.target.value)
