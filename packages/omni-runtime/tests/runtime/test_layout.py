"""The runtime's shape, checked: no import cycles (type-level included), no Ray outside its backend, light errors.

The parent and the worker are composed of parts with narrow interfaces; an
import cycle (even one only a type checker follows) is where such parts
start to lean on each other's insides again, so the graph is walked here
from the source, every ``import`` counted: module level, under
``TYPE_CHECKING``, and (separately) inside functions.
"""

from __future__ import annotations

import ast
import graphlib
import re
import subprocess
import sys
from pathlib import Path

import omni_runtime

SRC = Path(omni_runtime.__file__).resolve().parent
PACKAGE = "omni_runtime"

NOT_CORE = ("raycluster", "cli", "serving", "bench", "transport", "testing")
"""Folders outside the runtime core: the cluster backend itself, the user-facing front ends, the wire layer."""


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = [PACKAGE, *path.relative_to(SRC).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


MODULES = _modules()


def _imports(name: str, in_functions: bool) -> set[str]:
    """The omni_runtime modules ``name`` imports (``from pkg import sub`` counts as ``pkg.sub``)."""
    path, is_package = MODULES[name]
    package = name if is_package else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def resolve(target: str) -> None:
        while target and target not in MODULES and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in MODULES and target != name:
            found.add(target)

    def visit(node: ast.AST, inside_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = inside_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if in_functions or not inside_function:
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        resolve(alias.name)
                elif isinstance(child, ast.ImportFrom):
                    if child.level:
                        base = package.split(".")
                        base = base[: len(base) - (child.level - 1)]
                        module = ".".join(base + ([child.module] if child.module else []))
                    else:
                        module = child.module or ""
                    for alias in child.names:
                        sub = f"{module}.{alias.name}"
                        resolve(sub if sub in MODULES else module)
            visit(child, nested)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (empty when there is none), as :mod:`graphlib` finds it."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        return list(error.args[1])
    return []


def test_the_walk_sees_every_kind_of_import():
    """Fail closed: a walk that found no edges would pass the cycle checks below for nothing."""
    assert {"omni_runtime.parent.admission", "omni_runtime.launch.registry", "omni_runtime.envelope"} <= _imports("omni_runtime.parent.runtime", False)
    assert "omni_runtime.parent.runtime" in _imports("omni_runtime", False)  # under TYPE_CHECKING
    assert "omni_runtime.transport" in _imports("omni_runtime.parent.runtime", True)  # inside start()
    assert _cycle({"a": {"b"}, "b": {"a"}}) != []


def test_no_import_cycle_at_module_or_type_level():
    graph = {name: _imports(name, in_functions=False) for name in MODULES}
    assert _cycle(graph) == []


def test_no_import_cycle_in_the_core_counting_late_imports_too():
    core = {n for n in MODULES if not any(n.startswith(f"{PACKAGE}.{folder}") for folder in NOT_CORE)}
    graph = {name: _imports(name, in_functions=True) & core for name in core}
    assert _cycle(graph) == []


def test_nothing_outside_the_cluster_backend_names_ray():
    """The parent, the worker, supervision and the launch seam know backends only by their interface."""
    word = re.compile(r"\bray\b", re.IGNORECASE)
    offenders = []
    for path, _ in MODULES.values():
        relative = path.relative_to(SRC)
        if relative.parts[0] in NOT_CORE or relative.as_posix() == "launch/registry.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if word.search(line):
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert offenders == []


def test_importing_the_errors_loads_neither_the_compiler_nor_torch():
    code = "import sys, omni_runtime.errors; print(sorted(m for m in ('omni_compiler', 'torch', 'zmq') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_public_names_still_import_from_the_package_root():
    code = "from omni_runtime import Runtime, SyncRuntime, RequestHandle, StagePayload, StageContext, RequestFailed; print(Runtime.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "omni_runtime.parent.runtime"
