"""The OS process that hosts one process instance's stages.

* :mod:`.entry` - :func:`run_worker`, the entry point (one JSON argument); ``python -m omni_runtime.worker`` reads it from stdin.
* :mod:`.build` - build the stages in declaration order (:class:`StageBuildError` on failure).
* :mod:`.core` - :class:`Worker`: report ready, serve, stop; assembled from
  :mod:`.inbound` (messages in), :mod:`.execution` (running stages) and
  :mod:`.outbound` (output on), sharing :mod:`.state`.
"""

from .build import StageBuildError
from .core import Worker
from .entry import run_worker
from .options import WorkerOptions

__all__ = ["StageBuildError", "Worker", "WorkerOptions", "run_worker"]
