"""Shared-memory segments for large tensors, with a bounded budget per sender.

* :mod:`.segment` - names (per-run prefix), layout, :func:`cleanup_run`.
* :mod:`.pool` - :class:`ShmPool`, the sender's budget with back-pressure and reuse.
* :mod:`.reader` - :class:`ShmReader`, the receiver's claim-and-copy.

Only the process that owns the run (the parent) removes a run's segments
(:func:`cleanup_run`, or :func:`remove_sender_segments` for one dead sender);
a pool unlinks only its own segments when it closes.
"""

from .pool import DEFAULT_BUDGET_BYTES, ShmLease, ShmPool
from .reader import ShmReader
from .segment import HEADER_BYTES, SHM_DIR, ShmRef, cleanup_run, new_run_prefix, remove_sender_segments, validate_prefix

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "HEADER_BYTES",
    "SHM_DIR",
    "ShmLease",
    "ShmPool",
    "ShmReader",
    "ShmRef",
    "cleanup_run",
    "new_run_prefix",
    "remove_sender_segments",
    "validate_prefix",
]
