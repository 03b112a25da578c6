"""Did-you-mean suggestions, so a typo costs one glance instead of a docs search."""

from __future__ import annotations

from collections.abc import Iterable


def closest(word: str, candidates: Iterable[str]) -> str | None:
    import difflib  # on the error path only: a valid config never pays for it

    options = sorted(set(candidates))
    matches = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, candidates: Iterable[str], what: str) -> str:
    """A fix sentence: the closest candidate if any, else the full list of valid names."""
    options = sorted(set(candidates))
    match = closest(word, options)
    if match is not None:
        return f"did you mean {match!r}? Valid {what}: {', '.join(options)}"
    if options:
        return f"use one of the valid {what}: {', '.join(options)}"
    return f"there are no valid {what} here"
