"""Refuse, before the native parser sees them, sources it cannot take safely.

libcst's native parser recurses on the machine stack for every bracket level
(2,000 nested brackets end the process with SIGSEGV, no output), and its time
grows with the square of an operator or trailer chain (a 1,000-term sum takes
about a second, 3,000 terms over ten). A linter run as a pre-commit hook must
end with a finding instead, so this scan (one regular-expression pass over the
text, strings and comments skipped) measures both and names the place:

* bracket nesting deeper than CPython's own limit (200): no valid module has it;
* one chain of operators and trailers longer than :data:`MAX_CHAIN`, or chains
  whose squared lengths together pass :data:`CHAIN_BUDGET` (the parse would
  take more than a few seconds).
"""

from __future__ import annotations

import re

#: CPython's tokenizer refuses deeper bracket nesting ("too many nested parentheses").
MAX_NESTING = 200
#: The longest chain of binary operators and trailers (``.attr``, ``(...)``, ``[...]``) in one expression.
MAX_CHAIN = 1500
#: Sum of squared chain lengths in one file (parse time grows with it).
CHAIN_BUDGET = 4_000_000

_TOKEN = re.compile(
    r"""
      (?P<comment>\#[^\n]*)
    | (?P<string>[rRbBuUfF]{0,2}(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
    | (?P<number>\d[\w.]*(?:[eE][+-]?\d+)?|\.\d[\w]*)
    | (?P<word>[^\W\d]\w*)
    | (?P<open>[(\[{])
    | (?P<close>[)\]}])
    | (?P<op>\*\*|//|<<|>>|->|[-+*/%@&|^~.])
    | (?P<sep>[,;:=]|\\\n)
    | (?P<newline>\n)
    """,
    re.VERBOSE | re.DOTALL,
)


def parse_hazard(source: str) -> tuple[int, int, str] | None:
    """(line, col, reason) of the first construct the parser cannot take safely, else None."""
    if len(source) < 2 * MAX_NESTING:
        return None  # too short to nest 200 brackets or chain 1,500 operators
    if _cannot_reach_a_limit(source):
        return None
    depth = 0
    chains = [0]
    budget = 0
    line = 1
    line_start = 0
    for match in _TOKEN.finditer(source):
        kind = match.lastgroup
        if kind == "newline":
            line += 1
            line_start = match.end()
            if depth == 0:
                budget += chains[0] * chains[0]
                chains[0] = 0
            continue
        if kind == "string" or kind == "comment":
            text = match.group()
            if "\n" in text:
                line += text.count("\n")
                line_start = match.start() + text.rfind("\n") + 1
            continue
        if kind == "op":
            chains[-1] += 1
        elif kind == "open":
            chains[-1] += 1
            depth += 1
            if depth > MAX_NESTING:
                return line, match.start() - line_start + 1, (
                    f"brackets nest deeper than {MAX_NESTING} levels (CPython refuses such a module; "
                    f"the parser would overflow its stack)"
                )
            chains.append(0)
        elif kind == "close":
            if depth > 0:
                depth -= 1
                inner = chains.pop()
                budget += inner * inner
        elif kind == "sep":
            budget += chains[-1] * chains[-1]
            chains[-1] = 0
            continue
        else:
            continue
        if chains[-1] > MAX_CHAIN:
            return line, match.start() - line_start + 1, (
                f"an expression chains more than {MAX_CHAIN} operators or trailers; the parser's time grows "
                f"with the square of such a chain: split the expression"
            )
        if budget > CHAIN_BUDGET:
            return line, match.start() - line_start + 1, (
                "the module's long operator chains would take the parser minutes; split the expressions"
            )
    return None


_OPENERS = "([{"
_OPERATOR_CHARS = "-+*/%@&|^~.<>"


def _cannot_reach_a_limit(source: str) -> bool:
    """True when counting characters alone proves the source safe (most files; ``str.count`` is C-fast).

    Nesting depth is at most the number of opening brackets, and every chain step is an opening
    bracket or an operator character, so their count bounds the longest chain, and its square
    bounds the sum of squared chain lengths. Brackets and operators inside strings only raise the count."""
    opens = sum(source.count(char) for char in _OPENERS)
    if opens > MAX_NESTING:
        return False
    steps = opens + sum(source.count(char) for char in _OPERATOR_CHARS)
    return steps <= MAX_CHAIN and steps * steps <= CHAIN_BUDGET
