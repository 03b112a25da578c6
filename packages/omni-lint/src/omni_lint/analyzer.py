"""What one function does: which state it reads or writes, what it reaches.

A function body is walked once (memoised): each reference is resolved through
the function's own scope, its enclosing functions (closures) and its module,
then classified by how it is used (see :mod:`omni_lint.walker`). The analyzer
also summarises what registry methods do to their instance and what a callee
does to a parameter, so calls through the tree keep their exact effects.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from .facts import AccessKey, Facts, Scope, param_names
from .project import Project
from .scan import ClassKey, FuncKey, ImportBinding, StateKey, dotted_name, import_bindings, resolve_relative
from .symbols import ClassSelfSym, ClassSym, FuncSym, InstanceSym, ModuleSym, ParamKey, ParamSym, SelfKey, StateSym, SuperSym, Sym
from .verbs import container_effect, guess_kind
from .walk import walk
from .walker import FunctionWalker


class Analyzer:
    """Per-import-root memo of function facts, scopes and registry summaries."""

    def __init__(self, project: Project):
        self.project = project
        self._facts: dict[FuncKey, tuple[Facts, Any]] = {}
        self._in_progress: set[FuncKey] = set()
        self._scopes: dict[FuncKey, Scope | None] = {}
        self._returns: dict[FuncKey, StateKey | None] = {}
        self._returns_busy: set[FuncKey] = set()
        self._effects: dict[FuncKey, frozenset[str]] = {}
        self._mutable: dict[ClassKey, frozenset[str]] = {}
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
        params = param_names(func.node.params)
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
                    if isinstance(sym, (StateSym, ModuleSym, FuncSym, ClassSym)):
                        return sym  # a state, or a module / function / class bound once (``mod = import_module(...)``)
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
            dynamic = self.dynamic_target(scope, expr, guard)
            if dynamic is not None:
                return dynamic[0]
            target = self.resolve_value(scope, expr.func, guard)
            if isinstance(target, FuncSym):
                state = self.returns_state(target.key)
                return StateSym(state) if state is not None else None
        return None

    def dynamic_target(self, scope: Scope, call: cst.Call, guard: frozenset = frozenset()) -> tuple[Sym | None, bool] | None:
        """``importlib.import_module("pkg.mod")`` and ``getattr(module_or_class, "name")`` of the tree:
        (the symbol, False) with a literal name; (None, True) when the name is computed, so the call
        cannot be followed; None for any other call."""
        name = dotted_name(call.func)
        args = [arg for arg in call.args if arg.keyword is None and not arg.star]
        if name == "getattr" and len(args) >= 2 and self.resolve_name(scope, "getattr", guard) is None:
            target = self.resolve_value(scope, args[0].value, guard)
            if not isinstance(target, (ModuleSym, ClassSym)):
                return None
            literal = _literal(args[1].value)
            if literal is None:
                return None, True
            return self.project.member(target, literal), False
        if name in ("importlib.import_module", "import_module") and args and self.resolve_value(scope, call.func, guard) is None:
            return self._module_by_name(scope, args[0].value)
        if name == "__import__" and args and self.resolve_name(scope, "__import__", guard) is None:
            # ``__import__("a.b")`` runs a.b and returns ``a``; with a non-empty fromlist it returns a.b
            fromlist = [arg for arg in call.args if arg.keyword is not None and arg.keyword.value == "fromlist"]
            found = self._module_by_name(scope, args[0].value)
            if found is None or found[0] is None or fromlist or len(args) >= 4:
                return found
            return ModuleSym(found[0].name.split(".")[0]), False  # type: ignore[union-attr]
        if name == "sys.modules.get" and args and self._is_sys(scope, guard):
            return self._module_by_name(scope, args[0].value)
        return None

    def _is_sys(self, scope: Scope, guard: frozenset) -> bool:
        """``sys`` here is the standard library's (imported from outside the tree)."""
        binding = scope.module.imports.get("sys")
        return self.resolve_name(scope, "sys", guard) is None and binding is not None and binding.module == "sys"

    def modules_subscript(self, scope: Scope, node: cst.Subscript) -> tuple[Sym | None, bool] | None:
        """``sys.modules["pkg.mod"]``: the module (a literal key) or unresolved (a computed one)."""
        if dotted_name(node.value) != "sys.modules" or not self._is_sys(scope, frozenset()):
            return None
        if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
            return None, True
        return self._module_by_name(scope, node.slice[0].slice.value)  # type: ignore[attr-defined]

    def _module_by_name(self, scope: Scope, expr: cst.BaseExpression) -> tuple[Sym | None, bool] | None:
        """A module named by a string expression: found (literal), unresolved (computed, or a
        literal naming a module of the tree that does not exist), or None (outside the tree)."""
        literal = _literal(expr)
        if literal is None:
            return None, True
        if literal.startswith("."):
            level = len(literal) - len(literal.lstrip("."))
            literal = resolve_relative(scope.module, level, literal[level:] or None)
        if self.project.is_module(literal):
            return ModuleSym(literal), False
        return (None, True) if self.project.in_tree(literal) else None

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
        """What the function does (memoised; shared with the other units of the run, together with
        the files and paths computing it looked at, which each unit that uses it records)."""
        tracker = self.project.sources
        if key in self._facts:
            result, deps = self._facts[key]
            tracker.replay(deps)
            return result
        if key in self._in_progress:
            return Facts()
        shared = tracker.shared_facts.get((self.project.root, key))
        if shared is not None:
            self._facts[key] = shared
            tracker.replay(shared[1])
            return shared[0]
        self._in_progress.add(key)
        tracker.begin()
        try:
            scope = self.scope(key)
            result = Facts()
            if scope is not None:
                walker = FunctionWalker(self, scope, scope.module.parsed)
                walk(scope.func.node.body, walker)
                result = walker.finish()
        finally:
            self._in_progress.discard(key)
            deps = tracker.end()
        self._facts[key] = tracker.shared_facts[(self.project.root, key)] = (result, deps)
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
        func = self.project.function(key)
        mutable = self._mutable_attributes(func.cls) if func is not None and func.cls is not None else None
        kinds = {
            "write" if access.kind == "rebind" else access.kind
            for access in facts.accesses
            if isinstance(access.key, SelfKey) and (mutable is None or access.key.attr in mutable)
        }
        for callee in facts.self_calls:
            kinds |= self.method_effect(callee)
        self._effects[key] = frozenset(kinds)
        return self._effects[key]

    def _mutable_attributes(self, cls: ClassKey) -> frozenset[str]:
        """Attributes of ``self`` that some method of the class changes after construction.

        The rest (a folder, a size limit, set once in ``__init__``) is configuration: reading it
        says nothing about what another stage stored, so a get-or-compute method that also reads
        its configuration stays a cache read, while a ``take`` that pops a stored item stays a
        consuming read of a registry."""
        cached = self._mutable.get(cls)
        if cached is not None:
            return cached
        self._mutable[cls] = frozenset()  # recursion guard
        names: set[str] = set()
        for method in self.project.effective_methods(cls):
            func = self.project.function(method)
            constructor = func is not None and func.node.name.value == "__init__"
            for access in self.facts(method).accesses:
                if not isinstance(access.key, SelfKey):
                    continue
                if access.kind in ("write", "fill", "cache", "gfill") or (access.kind == "rebind" and not constructor):
                    names.add(access.key.attr)
        self._mutable[cls] = frozenset(names)
        return self._mutable[cls]

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




def _literal(node: cst.BaseExpression) -> str | None:
    if type(node) is cst.SimpleString:
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None
