"""Contracts declared in Python: a ``PipelineConfig`` subclass in the model folder.

Code bases of this field often declare a pipeline as a config class rather than
(or besides) a YAML file::

    PKG = "omni_models.qwen3_tts"

    def _stages():
        return [
            StageConfig(name="preprocessing", factory=f"{PKG}.stages:build_preprocessing", next=["tts_engine"]),
            StageConfig(name="tts_engine", factory=f"{PKG}.stages:build_tts_engine", terminal=True),
        ]

    class QwenPipeline(PipelineConfig):
        stages: list[StageConfig] = Field(default_factory=_stages)

        @classmethod
        def process_local_edges(cls):
            return [("preprocessing", "tts_engine")]

    class QwenSplitPipeline(QwenPipeline):          # a variant: overrides the edges
        @classmethod
        def process_local_edges(cls):
            return []

Each such class (a variant) is read statically with :mod:`omni_lint.pyeval`
and checked like a pipeline file. A value it cannot compute is an OL005
finding naming the expression; a folder that also has pipeline YAML must
agree with it (OL006 lists the differences).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .bindings import assign_pairs, block_statements
from .findings import Finding, Severity
from .pipeline import DeclaredEdge, PipelineView, StageView
from .project import Project
from .pyeval import Evaluator, Frame, Record, Unknown, need
from .scan import ClassKey, ModuleInfo, dotted_name
from .symbols import ClassSym, FuncSym


@dataclass(frozen=True)
class PyContract:
    cls: ClassKey
    path: Path
    view: PipelineView | None
    label: str


def is_contract_class(project: Project, key: ClassKey) -> bool:
    """True when an ancestor, resolved to its qualified name, is a ``PipelineConfig``."""
    return any(name.rpartition(".")[2] == "PipelineConfig" for name in project.qualified_ancestors(key))


def contract_classes(project: Project, modules: list[ModuleInfo]) -> list[ClassKey]:
    """Classes of the folder's modules with a ``PipelineConfig`` base (directly or through the tree)."""
    found = []
    for module in modules:
        for qualname, klass in module.classes.items():
            if "." in qualname:
                continue
            if is_contract_class(project, klass.key):
                found.append(klass.key)
    return found


_ENTRY_CLASS = "it is the module's EntryClass"


def _ancestors_known(project: Project, key: ClassKey) -> bool:
    """True when every base in the class's ancestry is known by name: a class of the tree, or one
    imported by name from outside it (``from torch import nn`` -> ``nn.Module``). Such a class
    whose ancestors exclude a ``PipelineConfig`` is not a contract; a base the analysis cannot
    name (a call, a star import, an unbound name) could be one, so that stays a finding."""
    for cls_key in project.mro(key):
        klass = project.klass(cls_key)
        module = project.module(cls_key.module)
        if klass is None or module is None:
            return False
        for arg in klass.node.bases:
            if isinstance(project.resolve_expr_at_module(module, arg.value), ClassSym):
                continue
            name = dotted_name(arg.value)
            if name is None or (name.partition(".")[0] not in module.imports and name not in _BUILTIN_BASES):
                return False
    return True


_BUILTIN_BASES = frozenset({"object", "dict", "list", "tuple", "Exception"})


def _looks_like_contract(module: ModuleInfo, klass: Any) -> str | None:
    """Why a top-level class reads as a pipeline contract although no base resolves to
    ``PipelineConfig`` (it is the module's ``EntryClass``, or it defines ``stages`` /
    ``process_local_edges``), else None."""
    if "process_local_edges" in klass.methods:
        return "it defines process_local_edges()"
    for statement in block_statements(klass.node.body):
        for target, _, _ in assign_pairs(statement):
            if target in ("stages", "process_local_edges"):
                return f"it defines `{target}`"
    name = klass.key.qualname
    for statement in block_statements(module.parsed.module):
        for target, value, _ in assign_pairs(statement):
            if target == "EntryClass" and value is not None and dotted_name(value) == name:
                return _ENTRY_CLASS
    return None


def unreadable_lookalikes(project: Project, modules: list[ModuleInfo], display: Any) -> list[Finding]:
    """OL005 for every class that looks like a contract but is not one omni-lint can read:
    the check fails closed instead of reporting a clean run over a contract it never saw."""
    findings = []
    for module in modules:
        for qualname, klass in module.classes.items():
            if "." in qualname or is_contract_class(project, klass.key):
                continue
            why = _looks_like_contract(module, klass)
            if why is None or (why == _ENTRY_CLASS and _ancestors_known(project, klass.key)):
                continue  # SGLang's model registry names an nn.Module `EntryClass` too: not a contract
            bases = [" ".join(module.parsed.module.code_for_node(arg.value).split()) for arg in klass.node.bases]
            resolved = sorted(set(project.qualified_ancestors(klass.key)))
            shown = ", ".join(f"`{b}`" for b in bases) or "no base"
            message = (
                f"{qualname} ({display(module.parsed.path)}) looks like a pipeline contract ({why}), but its base "
                f"{shown} does not resolve to a PipelineConfig (resolved ancestors: {', '.join(resolved) or 'none'}); "
                f"its stages and handoffs are not checked. Import the base from the framework by its own name "
                f"(or from a module of this tree that defines it), or keep the contract in pipeline YAML"
            )
            line, col = module.parsed.position(klass.node)
            findings.append(Finding(str(module.parsed.path), line, col, "OL005", message, Severity.ERROR))
    return findings


def read_contracts(project: Project, modules: list[ModuleInfo], display: Any) -> tuple[list[PyContract], list[Finding]]:
    """Every contract class as a :class:`PipelineView`, and OL005 findings for what cannot be read
    (a value it cannot compute, or a class that looks like a contract but does not resolve to one)."""
    evaluator = Evaluator(project)
    contracts: list[PyContract] = []
    findings: list[Finding] = unreadable_lookalikes(project, modules, display)
    for key in contract_classes(project, modules):
        module = project.module(key.module)
        klass = project.klass(key)
        assert module is not None and klass is not None
        path = module.parsed.path
        label = f"{key.qualname} ({display(path)})"
        try:
            stages = evaluator.class_attribute(key, "stages", klass.node, module)
        except Unknown as unknown:
            if "has no attribute stages" in unknown.why:
                continue  # an abstract base: its subclasses carry the stages
            findings.append(_unknown(unknown, label))
            continue
        try:
            view = _view(evaluator, project, key, module, stages)
        except Unknown as unknown:
            findings.append(_unknown(unknown, label))
            continue
        except _Shape as shape:
            line, col = shape.module.parsed.position(shape.node)
            findings.append(Finding(str(shape.module.parsed.path), line, col, "OL005", f"{label}: {shape.message}", Severity.ERROR))
            continue
        contracts.append(PyContract(key, path, view, label))
    return contracts, findings


def _unknown(unknown: Unknown, label: str) -> Finding:
    line, col = unknown.module.parsed.position(unknown.node)
    message = (
        f"{label}: cannot evaluate `{unknown.code}` statically ({unknown.why}); the contract is not checked. "
        f"Write it in a form omni-lint reads (literals, module constants, f-strings, straight-line helpers; "
        f"see the omni-lint README), or keep the contract in pipeline YAML"
    )
    return Finding(str(unknown.module.parsed.path), line, col, "OL005", message, Severity.ERROR)


class _Shape(Exception):
    def __init__(self, module: ModuleInfo, node: Any, message: str):
        self.module, self.node, self.message = module, node, message
        super().__init__(message)


def _fields(item: Any, module: ModuleInfo, node: Any, what: str) -> tuple[dict[str, Any], ModuleInfo, Any]:
    item = need(item)
    if isinstance(item, Record):
        return item.args, item.module, item.node
    if isinstance(item, dict):
        return item, module, node
    raise _Shape(module, node, f"{what} is {type(item).__name__}, not a StageConfig(...) call or a dict")


def _names(value: Any, module: ModuleInfo, node: Any, what: str) -> list[str]:
    value = need(value)
    if isinstance(value, (list, tuple)):
        value = [need(v) for v in value]
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise _Shape(module, node, f"{what} must be a stage name or a list of them")


def _view(evaluator: Evaluator, project: Project, key: ClassKey, module: ModuleInfo, stages: Any) -> PipelineView:
    klass = project.klass(key)
    assert klass is not None
    stages = need(stages)
    if not isinstance(stages, (list, tuple)):
        raise _Shape(module, klass.node, "stages is not a list")
    views: list[StageView] = []
    edges: set[tuple[str, str]] = set()
    for item in stages:
        fields, where, node = _fields(item, module, klass.node, "a stage")
        # only what the contract checks must be computed: a stage's other fields (its resources,
        # factory_args, runtime...) may hold anything the analysis cannot read
        name, factory = need(fields.get("name")), need(fields.get("factory"))
        if not isinstance(name, str) or not isinstance(factory, str):
            raise _Shape(where, node, "a stage without a string name and factory")
        line, col = where.parsed.position(node)
        merge_fn, route_fn = need(fields.get("merge_fn")), need(fields.get("route_fn"))
        for label, value in (("merge_fn", merge_fn), ("route_fn", route_fn)):
            if value is not None and not isinstance(value, str):
                raise _Shape(where, node, f"{label} of stage {name} is not a dotted path string")
        views.append(StageView(name, factory, merge_fn, route_fn, line, col))
        for target in [*_names(fields.get("next"), where, node, "next"), *_names(fields.get("stream_to"), where, node, "stream_to")]:
            edges.add((name, target))
        for source in _names(fields.get("wait_for"), where, node, "wait_for"):
            edges.add((source, name))
    declared = _declared(evaluator, project, key, module)
    return PipelineView(module.parsed.path, tuple(views), frozenset(edges), tuple(declared))


def _declared(evaluator: Evaluator, project: Project, key: ClassKey, module: ModuleInfo) -> list[DeclaredEdge]:
    klass = project.klass(key)
    assert klass is not None
    member = project.class_member(key, "process_local_edges")
    if isinstance(member, FuncSym):
        func = project.function(member.key)
        owner = project.module(member.key.module)
        assert func is not None and owner is not None
        value = evaluator.run_function(member.key, [], {}, key, func.node, Frame(module, {}, key))
        where, node = owner, func.node
    else:
        try:
            value = evaluator.class_attribute(key, "process_local_edges", klass.node, module)
        except Unknown as unknown:
            if "has no attribute" in unknown.why:
                return []
            raise
        where, node = module, klass.node
    value = need(value)
    if not isinstance(value, (list, tuple)):
        raise _Shape(where, node, "process_local_edges() does not return a list")
    line, col = where.parsed.position(node)
    declared = []
    for item in value:
        item = need(item)
        if isinstance(item, (list, tuple)):
            item = [need(v) for v in item]
        if isinstance(item, (list, tuple)) and len(item) in (2, 3) and all(isinstance(v, str) for v in item):
            src, dst, reason = item[0], item[1], item[2] if len(item) == 3 else ""
            declared.append(DeclaredEdge(src, dst, reason, line, col))
            continue
        fields, at, at_node = _fields(item, where, node, "an edge")
        src, dst, reason = need(fields.get("src")), need(fields.get("dst")), need(fields.get("reason", ""))
        if not all(isinstance(v, str) for v in (src, dst, reason)):
            raise _Shape(at, at_node, "an edge without string src and dst")
        edge_line, edge_col = at.parsed.position(at_node)
        declared.append(DeclaredEdge(src, dst, reason, edge_line, edge_col))
    return declared


def disagreement(contract: PyContract, yaml_views: list[PipelineView], display: Any) -> Finding | None:
    """OL006 when no pipeline file of the folder says what the class says (None when one does)."""
    assert contract.view is not None
    view = contract.view
    mine = {(s.name, s.factory, s.merge_fn, s.route_fn) for s in view.stages}
    pairs = {(e.src, e.dst) for e in view.declared}
    for other in yaml_views:
        if {(s.name, s.factory, s.merge_fn, s.route_fn) for s in other.stages} == mine and other.edges == view.edges and {(e.src, e.dst) for e in other.declared} == pairs:
            return None
    closest = max(yaml_views, key=lambda other: (len({s.name for s in other.stages} & {s.name for s in view.stages}), other.path.name == "pipeline.yaml"))
    theirs = {s.name: s for s in closest.stages}
    ours = {s.name: s for s in view.stages}
    differences = []
    for name in sorted(set(ours) - set(theirs)):
        differences.append(f"stage {name} only in the class")
    for name in sorted(set(theirs) - set(ours)):
        differences.append(f"stage {name} only in {closest.path.name}")
    for name in sorted(set(ours) & set(theirs)):
        for attr in ("factory", "merge_fn", "route_fn"):
            a, b = getattr(ours[name], attr), getattr(theirs[name], attr)
            if a != b:
                differences.append(f"stage {name} {attr}: {a!r} in the class, {b!r} in {closest.path.name}")
    for src, dst in sorted(view.edges - closest.edges):
        differences.append(f"pipeline edge {src} -> {dst} only in the class")
    for src, dst in sorted(closest.edges - view.edges):
        differences.append(f"pipeline edge {src} -> {dst} only in {closest.path.name}")
    theirs_pairs = {(e.src, e.dst) for e in closest.declared}
    for src, dst in sorted(pairs - theirs_pairs):
        differences.append(f"process-local edge {src} -> {dst} declared only in the class")
    for src, dst in sorted(theirs_pairs - pairs):
        differences.append(f"process-local edge {src} -> {dst} declared only in {closest.path.name}")
    stage = view.stages[0] if view.stages else None
    line, col = (stage.line, stage.col) if stage else (1, 1)
    message = (
        f"{contract.label} and {display(closest.path)} disagree: {'; '.join(differences)}. "
        f"The runtime loads one of them: make them say the same, or keep one"
    )
    return Finding(str(contract.path), line, col, "OL006", message, Severity.ERROR)
