"""Pause the cyclic garbage collector around large, acyclic allocations.

Validating or compiling a 10,000-stage pipeline allocates hundreds of thousands
of small objects and no reference cycles; with the collector running, its
full-heap passes make the cost grow faster than the pipeline. Reference
counting still frees everything; the collector is restored to its previous state.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
