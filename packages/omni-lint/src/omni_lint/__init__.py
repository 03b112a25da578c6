"""omni-lint: prove that model code agrees with its process-local contract.

Reads model folders (pipeline files through omni-config, Python through
libcst) without importing them, finds module-level state handed between
stages, and checks it against the pipeline's ``process_local_edges``.
"""

__version__ = "0.1.0"

from .engine import LintReport, lint  # noqa: E402
from .findings import Finding, Severity  # noqa: E402
from .rules import RULES, Rule  # noqa: E402
from .settings import Settings, SettingsError, find_pyproject, load_settings  # noqa: E402

__all__ = ["RULES", "Finding", "LintReport", "Rule", "Settings", "SettingsError", "Severity", "__version__", "find_pyproject", "lint", "load_settings"]
