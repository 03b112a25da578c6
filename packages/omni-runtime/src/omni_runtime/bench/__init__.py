"""``omni bench``: measure a workload on the current topology and on alternatives, side by side.

The spec asks operators to "measure the target workload before making a topology change
persistent". This package does that: it compiles the current topology (model + deployment
file + dotted overrides) and every ``--alt NAME="..."`` override set applied on top of it,
rejects any invalid one before starting anything, then starts each topology in turn with the
real runtime and drives the same deterministic requests through it (``Runtime.submit``, the
path ``omni serve`` uses) at each concurrency level.

Reported per topology and concurrency, in the field's terms: requests per second; time to
first audio (TTFA, p50/p95); RTF, wall seconds per audio second (lower is better; below 1 is
faster than real time) and its inverse, audio seconds produced per wall second ("x real-time");
and the peak resident memory (RSS) of every OS process of the topology. ``--json`` prints the
rows for scripts; ``--plot FILE.png`` draws throughput and TTFA against concurrency for each
topology side by side (needs ``omni-runtime[plot]``).

Modules: ``options`` (the command line), ``workload`` (requests and their measurement),
``measure`` (running each topology into rows), ``report`` (table, JSON, entry point),
``plot`` (the figure).
"""

from __future__ import annotations

from .options import add_arguments
from .report import main, run

__all__ = ["add_arguments", "main", "run"]
