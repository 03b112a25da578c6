"""The value every rule produces: one finding at one place in one file.

Findings are plain frozen values so that every output format, the suppression
filter and the tests all see exactly the same thing, and so that sorting them
gives a stable order run after run.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Severity(str, enum.Enum):
    """``error`` fails the run (exit 1); ``warning`` (the analysis could not decide something)
    and ``info`` are reported but never fail it."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, order=True)
class Finding:
    """``path:line:col: CODE message``; ``line`` and ``col`` are 1-based."""

    path: str
    line: int
    col: int
    code: str
    message: str
    severity: Severity = field(default=Severity.ERROR, compare=False)

    def render(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
        }

