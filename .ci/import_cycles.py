"""Fail when the omni packages import each other in a cycle, imports under ``if TYPE_CHECKING:`` included.

A cycle makes the import order matter (a half-initialised module, an
ImportError that depends on which module a user imports first) and ties two
ideas together so neither can be read or moved alone; a type-only import is
still a dependency a reader follows. grimp builds the graph from the source
(nothing is imported); an edge ``a -> b`` is on a cycle when ``b`` reaches
``a`` back, and each such edge is printed with the chain that closes it.

Run: ``PYTHONPATH=packages/omni-config/src:... python .ci/import_cycles.py`` (the
``lint`` nox session does). Exit 0: no cycle; 1: cycles (listed); 2: a
package could not be found.
"""

from __future__ import annotations

import sys

import grimp

PACKAGES = ("omni_config", "omni_compiler", "omni_runtime", "omni_models", "omni_lint")


def cyclic_edges(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """Every direct import ``a -> b`` with a chain back from ``b`` to ``a``, as the closed cycle ``(a, b, ..., a)``."""
    out = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                out.append((importer, *back))
    return out


def main() -> int:
    try:
        graph = grimp.build_graph(*PACKAGES, include_external_packages=False, exclude_type_checking_imports=False, cache_dir=None)
    except (ValueError, ModuleNotFoundError) as exc:
        print(f"import cycles: cannot build the import graph ({exc}); put every package's src/ on PYTHONPATH", file=sys.stderr)
        return 2
    edges = cyclic_edges(graph)
    modules = sorted({m for cycle in edges for m in cycle})
    print(f"import cycles: {len(graph.modules)} modules, {len(edges)} imports on a cycle, {len(modules)} modules in cycles")
    for cycle in edges:
        line = graph.get_import_details(importer=cycle[0], imported=cycle[1])
        where = f" (line {line[0]['line_number']}: {line[0]['line_contents']})" if line else ""
        print(f"  {' -> '.join(cycle)}{where}")
    if edges:
        print("fix: move what both sides need into a module below them, or take the dependency as a Protocol", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
