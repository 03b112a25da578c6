"""CI installs only omni-config and omni-compiler: neither may import torch or libcst."""

from __future__ import annotations

import subprocess
import sys

from compiler_helpers import FIXTURES


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_imports_pull_in_neither_torch_nor_libcst():
    result = _python("import omni_config, omni_compiler, omni_compiler.cli, sys; assert 'torch' not in sys.modules and 'libcst' not in sys.modules")
    assert result.returncode == 0, result.stderr


def test_a_full_cli_run_pulls_in_neither_torch_nor_libcst():
    """Compiling and rendering (not just importing) must stay light too."""
    code = (
        "import sys\n"
        "from omni_compiler.cli import main\n"
        f"for fmt in ('text', 'json', 'mermaid', 'dot'):\n"
        f"    assert main(['show', {str(FIXTURES / 'higgs_tts.yaml')!r}, '--format', fmt]) == 0\n"
        "assert main(['schema']) == 0\n"
        "heavy = sorted(m for m in ('torch', 'libcst', 'numpy') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
