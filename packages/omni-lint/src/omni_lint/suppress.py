"""``# omni-lint: ignore[CODE] reason``: reviewed exceptions, never blanket ones.

A suppression applies to the line it is on, or, written on a line of its own,
to the next code line. It must name known codes and give a reason; anything
else suppresses nothing and is itself reported (OL800), and a suppression that
matched nothing is reported as information (OL801) so stale ones get removed.
Python comments are found with the tokenizer (never inside strings); YAML
comments with a line scan.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

from .findings import Finding, Severity
from .rules import RULES

_MARKER = re.compile(r"#\s*omni-lint\s*:(?P<rest>.*)$")
_IGNORE = re.compile(r"^\s*ignore\s*\[(?P<codes>[^\]]*)\]\s*(?P<reason>.*?)\s*$")
_FORM = "write `# omni-lint: ignore[CODE] reason`, e.g. `# omni-lint: ignore[OL001] drained by a sidecar in the same process`"


@dataclass
class Suppression:
    path: str
    line: int
    col: int
    codes: tuple[str, ...]
    reason: str
    lines: frozenset[int]
    used: bool = field(default=False)

    def covers(self, finding: Finding) -> bool:
        return finding.line in self.lines and finding.code in self.codes


def _parse(path: str, line: int, col: int, comment: str, lines: frozenset[int]) -> Suppression | Finding | None:
    marker = _MARKER.search(comment)
    if marker is None:
        return None
    match = _IGNORE.match(marker.group("rest"))
    if match is None:
        return Finding(path, line, col, "OL800", f"suppression does not name a code: {_FORM}", Severity.ERROR)
    codes = tuple(code.strip() for code in match.group("codes").split(",") if code.strip())
    if not codes:
        return Finding(path, line, col, "OL800", f"suppression names no code: {_FORM}", Severity.ERROR)
    unknown = [code for code in codes if code not in RULES]
    if unknown:
        return Finding(path, line, col, "OL800", f"suppression names unknown code {', '.join(unknown)} (known: {', '.join(RULES)}); {_FORM}", Severity.ERROR)
    if not match.group("reason"):
        return Finding(path, line, col, "OL800", f"suppression of {', '.join(codes)} gives no reason: {_FORM}", Severity.ERROR)
    return Suppression(path, line, col, codes, match.group("reason"), lines)


def scan_python(path: str, source: str) -> list[Suppression | Finding]:
    found: list[Suppression | Finding] = []
    if "omni-lint" not in source:
        return found
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return found
    code_lines = sorted({tok.start[0] for tok in tokens if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER)})
    for tok in tokens:
        if tok.type != tokenize.COMMENT or "omni-lint" not in tok.string:
            continue
        line = tok.start[0]
        own_line = tok.line[: tok.start[1]].strip() == ""
        lines = {line}
        if own_line:
            following = next((n for n in code_lines if n > line), None)
            if following is not None:
                lines.add(following)
        item = _parse(path, line, tok.start[1] + 1, tok.string, frozenset(lines))
        if item is not None:
            found.append(item)
    return found


def scan_yaml(path: str, text: str) -> list[Suppression | Finding]:
    found: list[Suppression | Finding] = []
    if "omni-lint" not in text:
        return found
    raw_lines = text.splitlines()
    code_lines = [i + 1 for i, text_line in enumerate(raw_lines) if text_line.strip() and not text_line.strip().startswith("#")]
    for index, raw in enumerate(raw_lines):
        position = raw.find("#")
        while position != -1 and "omni-lint" not in raw[position:]:
            position = -1
        if position == -1:
            continue
        marker = _MARKER.search(raw)
        if marker is None:
            continue
        line = index + 1
        lines = {line}
        if raw.strip().startswith("#"):
            following = next((n for n in code_lines if n > line), None)
            if following is not None:
                lines.add(following)
        item = _parse(path, line, marker.start() + 1, raw[marker.start():], frozenset(lines))
        if item is not None:
            found.append(item)
    return found
