"""CI installs only omni-config and omni-compiler: neither may import torch, libcst or ray."""

from __future__ import annotations

import subprocess
import sys

from compiler_helpers import FIXTURES


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_imports_pull_in_no_torch_libcst_or_ray():
    result = _python("import omni_config, omni_compiler, omni_compiler.cli, sys; assert not {'torch', 'libcst', 'ray'} & set(sys.modules)")
    assert result.returncode == 0, result.stderr


def test_a_full_cli_run_pulls_in_no_torch_libcst_or_ray():
    """Compiling and rendering (not just importing) must stay light too."""
    code = (
        "import sys\n"
        "from omni_compiler.cli import main\n"
        f"for fmt in ('text', 'json', 'mermaid', 'dot'):\n"
        f"    assert main(['show', {str(FIXTURES / 'higgs_tts.yaml')!r}, '--format', fmt]) == 0\n"
        "assert main(['schema']) == 0\n"
        "heavy = sorted(m for m in ('torch', 'libcst', 'ray', 'numpy') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr


def test_no_source_module_imports_a_heavy_package():
    """Static, so it fails even where torch, libcst or ray happen to be absent: no import of them at any
    depth (a lazy import inside a function would still break the compiler-only install when reached)."""
    import ast
    from pathlib import Path

    import omni_compiler
    import omni_config

    heavy = {"torch", "libcst", "ray", "numpy"}
    found = []
    for package in (omni_config, omni_compiler):
        for path in sorted(Path(package.__file__).parent.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
                found += [f"{path.name}:{node.lineno} {name}" for name in names if name.partition(".")[0] in heavy]
    assert not found, found
