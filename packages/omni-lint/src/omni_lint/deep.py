"""Run the analysis where valid Python cannot exhaust the stack.

Some libcst helpers (position metadata) and the name resolution recurse once
per level of the syntax tree, and a valid module may hold a 1,000-long
attribute chain or sum. Instead of failing on such a file, the work runs in a
thread with a large stack and a raised recursion limit (restored afterwards);
the parser itself is shielded by :mod:`omni_lint.guard`.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Stack of the analysis thread: address space only, pages are touched as the recursion needs them.
STACK_BYTES = 512 * 1024 * 1024
RECURSION_LIMIT = 200_000

_lock = threading.Lock()


def run_deep(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` in a big-stack thread; its exception (if any) is raised here."""
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(fn(*args))
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)

    with _lock:
        previous_stack = threading.stack_size()
        previous_limit = sys.getrecursionlimit()
        try:
            threading.stack_size(STACK_BYTES)
            thread = threading.Thread(target=target, name="omni-lint-analysis")
        finally:
            threading.stack_size(previous_stack)
        sys.setrecursionlimit(max(previous_limit, RECURSION_LIMIT))
        try:
            thread.start()
            thread.join()
        finally:
            sys.setrecursionlimit(previous_limit)
    if error:
        raise error[0]
    return result[0]
