"""Cross-module name resolution under one import root, without importing anything.

A dotted module name maps to ``<root>/a/b.py`` or ``<root>/a/b/__init__.py``;
names resolve through module-level definitions and (relative, aliased,
re-exported) imports. Anything that leaves the tree (torch, the standard
library) resolves to nothing, which is what lets the analysis stay static.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import libcst as cst

from .bindings import SelfAssigns
from .findings import Finding, Severity
from .scan import ClassInfo, ClassKey, FuncInfo, FuncKey, ImportBinding, ModuleInfo, StateDef, StateKey, dotted_name, scan_module
from .source import ParsedFile
from .symbols import ClassSelfSym, ClassSym, FuncSym, InstanceSym, ModuleSym, SelfAttrSym, SelfKey, StateSym, SuperSym, Sym
from .walk import walk


class Tracker(Protocol):
    """What a :class:`Project` reads its sources through (a unit's :class:`~omni_lint.unit.Tracker`).

    A protocol here, not an import of :mod:`.unit`: the unit builds projects, so
    importing it back (even for types) would tie the two modules in a cycle.
    """

    @property
    def scans(self) -> dict[tuple[Path, str, str], Any]: ...
    @property
    def shared_modules(self) -> dict[Any, Any]: ...
    def get(self, path: Path) -> ParsedFile: ...
    def is_file(self, path: Path) -> bool: ...
    def is_dir(self, path: Path) -> bool: ...
    def begin(self) -> None: ...
    def end(self) -> tuple[frozenset[Path], dict[str, str]]: ...
    def replay(self, deps: tuple[frozenset[Path], dict[str, str]]) -> None: ...




class Project:
    """All modules under one import root, scanned lazily and cached."""

    def __init__(self, root: Path, sources: Tracker):
        self.root = root
        self.sources = sources
        self._files: dict[str, Path | None] = {}
        self._modules: dict[str, ModuleInfo | None] = {}
        self._resolved_candidates: set[str] = set()
        self._mro: dict[ClassKey, list[ClassKey]] = {}
        self._instance_attrs: dict[ClassKey, frozenset[str]] = {}
        #: modules that failed to parse: name -> parsed file (reported as OL900)
        self.broken: dict[str, Path] = {}

    # -- files and modules -------------------------------------------------

    def module_file(self, name: str) -> Path | None:
        if name in self._files:
            return self._files[name]
        shared = self.sources.shared_modules.get((self.root, name))
        if shared is not None:  # found by another unit of the run: its probes count for this one too
            found, probes = shared
            self.sources.replay((frozenset(), probes))
            self._files[name] = found
            return found
        self.sources.begin()
        try:
            found = self._locate(name)
        finally:
            _reads, probes = self.sources.end()
        self.sources.shared_modules[(self.root, name)] = (found, probes)
        self._files[name] = found
        return found

    def _locate(self, name: str) -> Path | None:
        found = None
        if name and all(part.isidentifier() for part in name.split(".")):
            base = self.root.joinpath(*name.split("."))
            for candidate in (base / "__init__.py", base.with_name(base.name + ".py")):  # a package wins, as in Python
                if self.sources.is_file(candidate):
                    found = candidate
                    break
            else:
                if self.sources.is_dir(base):
                    found = base  # namespace package (no __init__.py)
        return found

    def is_module(self, name: str) -> bool:
        return self.module_file(name) is not None

    def in_tree(self, dotted: str) -> bool:
        """True when the top-level package of ``dotted`` lives under this root."""
        return self.is_module(dotted.split(".")[0])

    def module_name(self, path: Path) -> str | None:
        try:
            rel = path.resolve().relative_to(self.root)
        except ValueError:
            return None
        parts = list(rel.with_suffix("").parts)
        if parts and parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts) if parts else None

    def module(self, name: str) -> ModuleInfo | None:
        if name in self._modules:
            return self._modules[name]
        self._modules[name] = None  # guards import cycles while scanning
        path = self.module_file(name)
        info = None
        if path is not None and path.suffix == ".py":
            parsed = self.sources.get(path)
            if parsed.module is None:
                self.broken[name] = path
            else:
                # the per-file scan is shared by every project of the run with this root
                key = (self.root, name, parsed.digest)
                info = self.sources.scans.get(key)
                if info is None:
                    info = self.sources.scans[key] = scan_module(name, parsed, path.name == "__init__.py")
        self._modules[name] = info
        if info is not None:
            self._resolve_candidates(info)
        return info

    def missing_imports(self) -> list[Finding]:
        """OL103 for every import, in a module the analysis read, of a module of this tree that is not there."""
        findings = []
        for info in self._modules.values():
            if info is None:
                continue
            for node, names in info.import_sites:
                missing = [name for name in names if self.in_tree(name) and not self.is_module(name)]
                if missing:
                    line, col = info.parsed.position(node)
                    message = (
                        f"imports {', '.join(missing)}, which is not in the analysed tree ({self.root}); the import "
                        f"fails at run time, and any state that module holds is invisible to this check"
                    )
                    findings.append(Finding(str(info.parsed.path), line, col, "OL103", message, Severity.WARNING))
        return findings

    def function(self, key: FuncKey) -> FuncInfo | None:
        module = self.module(key.module)
        return module.functions.get(key.qualname) if module else None

    def klass(self, key: ClassKey) -> ClassInfo | None:
        module = self.module(key.module)
        return module.classes.get(key.qualname) if module else None

    def state(self, key: StateKey) -> StateDef | None:
        module = self.module(key.module)
        return module.states.get(key.name) if module else None

    # -- resolution ----------------------------------------------------------

    def _resolve_candidates(self, info: ModuleInfo) -> None:
        """Module-level ``NAME = Cls(...)`` becomes state when ``Cls`` is a class of the tree."""
        for name, candidate in info.candidates.items():
            target = self.resolve_expr_at_module(info, candidate.callee)
            if target is None and name not in info.states and self._imported_from_outside(info, candidate.callee):
                # ``_CACHE = cachetools.TTLCache(...)``: an object of a class outside the tree, state when
                # stages write it through its methods (a suppression marks the ones that are not)
                info.states[name] = StateDef(StateKey(info.name, name), "external", info.parsed, candidate.node)
                continue
            if not isinstance(target, ClassSym):
                continue
            existing = info.states.get(name)
            if existing is not None and existing.kind == "global":
                info.states[name] = StateDef(existing.key, "global", existing.parsed, existing.node, target.key)
            elif existing is None:
                info.states[name] = StateDef(StateKey(info.name, name), "instance", info.parsed, candidate.node, target.key)

    def _imported_from_outside(self, info: ModuleInfo, callee: cst.BaseExpression) -> bool:
        name = dotted_name(callee)
        binding = info.imports.get(name.split(".")[0]) if name else None
        return binding is not None and not self.in_tree(binding.module or (binding.attr or ""))

    def module_member(self, module_name: str, attr: str, seen: frozenset[tuple[str, str]] = frozenset()) -> Sym | None:
        if (module_name, attr) in seen:
            return None
        seen = seen | {(module_name, attr)}
        submodule = f"{module_name}.{attr}" if module_name else attr
        info = self.module(module_name)
        if info is not None:
            state = info.states.get(attr)
            if state is not None:
                return StateSym(state.key)
            top = info.top.get(attr)
            if top is not None and attr not in info.assigned:
                return FuncSym(top) if isinstance(top, FuncKey) else ClassSym(top)
            binding = info.imports.get(attr)
            if binding is not None:
                return self.resolve_import(binding, seen)
            for star in info.star_imports:
                found = self.module_member(star, attr, seen) if self.is_module(star) else None
                if found is not None and not isinstance(found, ModuleSym):
                    return found
        if self.is_module(submodule):
            return ModuleSym(submodule)
        return None

    def resolve_import(self, binding: ImportBinding, seen: frozenset[tuple[str, str]] = frozenset()) -> Sym | None:
        if binding.attr is None:
            return ModuleSym(binding.module) if self.is_module(binding.module) else None
        full = f"{binding.module}.{binding.attr}" if binding.module else binding.attr
        if self.is_module(full):
            return ModuleSym(full)
        if not self.is_module(binding.module):
            return None
        return self.module_member(binding.module, binding.attr, seen)

    def global_name(self, info: ModuleInfo, name: str) -> Sym | None:
        return self.module_member(info.name, name) if name not in info.imports else self.resolve_import(info.imports[name])

    def member(self, sym: Sym, attr: str) -> Sym | None:
        if isinstance(sym, ModuleSym):
            return self.module_member(sym.name, attr)
        if isinstance(sym, ClassSym):
            return self.class_member(sym.key, attr)
        if isinstance(sym, ClassSelfSym):
            return self.class_member(sym.cls, attr)
        if isinstance(sym, InstanceSym):
            found = self.class_member(sym.cls, attr)
            if isinstance(found, StateSym) and attr in self.instance_attributes(sym.cls):
                found = None  # ``self.items = []`` in a method shadows the class-level default
            return found if found is not None else SelfAttrSym(SelfKey(sym.cls, attr))
        if isinstance(sym, SuperSym):
            mro = self.mro(sym.cls)
            for cls_key in mro[1:]:
                klass = self.klass(cls_key)
                if klass is not None and attr in klass.methods:
                    return FuncSym(klass.methods[attr])
        return None

    def class_member(self, cls: ClassKey, attr: str) -> Sym | None:
        for cls_key in self.mro(cls):
            klass = self.klass(cls_key)
            if klass is None:
                continue
            if attr in klass.methods:
                return FuncSym(klass.methods[attr])
            if attr in klass.class_states:
                return StateSym(klass.class_states[attr])
        return None

    def instance_attributes(self, cls: ClassKey) -> frozenset[str]:
        """Attributes some method of ``cls`` (or a base) assigns on ``self``."""
        cached = self._instance_attrs.get(cls)
        if cached is not None:
            return cached
        names: set[str] = set()
        for cls_key in self.mro(cls):
            klass = self.klass(cls_key)
            if klass is None:
                continue
            for method in klass.methods.values():
                func = self.function(method)
                params = func.node.params.posonly_params or func.node.params.params if func else ()
                if func is None or not params or func.kind != "method":
                    continue
                walk(func.node.body, SelfAssigns(params[0].name.value, names))
        self._instance_attrs[cls] = frozenset(names)
        return self._instance_attrs[cls]

    def resolve_expr_at_module(self, info: ModuleInfo, expr: cst.BaseExpression) -> Sym | None:
        name = dotted_name(expr)
        if name is None:
            return None
        head, *rest = name.split(".")
        sym = self.global_name(info, head)
        for attr in rest:
            if sym is None:
                return None
            sym = self.member(sym, attr)
        return sym

    def bases(self, cls: ClassKey) -> list[ClassKey]:
        klass = self.klass(cls)
        module = self.module(cls.module)
        if klass is None or module is None:
            return []
        found = []
        for arg in klass.node.bases:
            target = self.resolve_expr_at_module(module, arg.value)
            if isinstance(target, ClassSym) and target.key != cls:
                found.append(target.key)
        return found

    def mro(self, cls: ClassKey) -> list[ClassKey]:
        """Depth-first, left-to-right, first occurrence wins (enough for resolving hooks)."""
        if cls in self._mro:
            return self._mro[cls]
        self._mro[cls] = [cls]
        order: list[ClassKey] = [cls]
        for base in self.bases(cls):
            for item in self.mro(base):
                if item not in order:
                    order.append(item)
        self._mro[cls] = order
        return order

    def effective_methods(self, cls: ClassKey) -> list[FuncKey]:
        """The method each name resolves to on an instance of ``cls`` (overrides win)."""
        chosen: dict[str, FuncKey] = {}
        for cls_key in self.mro(cls):
            klass = self.klass(cls_key)
            if klass is None:
                continue
            for name, key in klass.methods.items():
                chosen.setdefault(name, key)
        return sorted(chosen.values())

    def external_bases(self, cls: ClassKey) -> list[str]:
        """Dotted names of bases outside the tree (``dict``, ``collections.deque``...)."""
        names = []
        for cls_key in self.mro(cls):
            klass = self.klass(cls_key)
            module = self.module(cls_key.module)
            if klass is None or module is None:
                continue
            for arg in klass.node.bases:
                if not isinstance(self.resolve_expr_at_module(module, arg.value), ClassSym):
                    name = dotted_name(arg.value)
                    if name:
                        names.append(name)
        return names

    def qualified_ancestors(self, cls: ClassKey) -> list[str]:
        """Qualified dotted names of every ancestor of ``cls`` (not ``cls`` itself).

        In-tree ancestors by ``module.qualname``; a base from outside the tree by the module it is
        imported from (``from fw.config import PipelineConfig as PC`` -> ``fw.config.PipelineConfig``),
        so an alias, a re-export or a base defined in another module names the same class."""
        names: list[str] = []
        for cls_key in self.mro(cls):
            if cls_key != cls:
                names.append(f"{cls_key.module}.{cls_key.qualname}")
            klass = self.klass(cls_key)
            module = self.module(cls_key.module)
            if klass is None or module is None:
                continue
            for arg in klass.node.bases:
                if isinstance(self.resolve_expr_at_module(module, arg.value), ClassSym):
                    continue
                name = dotted_name(arg.value)
                if name:
                    names.append(self.qualify_external(module, name))
        return names

    def qualify_external(self, info: ModuleInfo, name: str) -> str:
        """``PC`` -> ``fw.config.PipelineConfig`` through the module's imports (else ``name``)."""
        head, _, rest = name.partition(".")
        binding = info.imports.get(head)
        if binding is None:
            return name
        base = f"{binding.module}.{binding.attr}" if binding.attr else binding.module
        base = base.lstrip(".")
        return f"{base}.{rest}" if rest else base

    def resolve_target(self, dotted: str) -> tuple[Sym | None, str]:
        """A factory/merge_fn/route_fn path -> symbol, or None and the reason."""
        if ":" in dotted:
            module_name, _, attr_path = dotted.partition(":")
            if not self.is_module(module_name):
                return None, f"module {module_name!r} not found under {self.root}"
        else:
            parts = dotted.split(".")
            for cut in range(len(parts) - 1, 0, -1):
                module_name = ".".join(parts[:cut])
                if self.is_module(module_name):
                    attr_path = ".".join(parts[cut:])
                    break
            else:
                return None, f"no module of {dotted!r} found under {self.root}"
        sym: Sym | None = ModuleSym(module_name)
        if self.module(module_name) is None and module_name in self.broken:
            return None, f"module {module_name!r} does not parse"
        for attr in attr_path.split("."):
            sym = self.member(sym, attr) if sym is not None else None
        if not isinstance(sym, (FuncSym, ClassSym)):
            return None, f"{attr_path!r} is not a function or class of module {module_name!r}"
        return sym, ""
