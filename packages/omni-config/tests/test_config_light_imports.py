"""omni-config must stay installable and importable without torch, libcst or ray (CI uses it alone)."""

from __future__ import annotations

import subprocess
import sys


def test_import_pulls_in_neither_torch_nor_libcst():
    code = (
        "import sys, omni_config\n"
        "omni_config.json_schema()\n"
        "heavy = sorted(m for m in ('torch', 'libcst', 'ray', 'numpy') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_the_installed_version_is_the_one_in_the_source():
    from importlib.metadata import version

    import omni_config

    assert version("omni-config") == omni_config.__version__
