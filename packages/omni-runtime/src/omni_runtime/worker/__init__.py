"""The OS process that hosts one process instance's stages.

* :mod:`.entry` - :func:`run_worker`, the one entry point (one JSON argument) every backend calls;
  ``python -m omni_runtime.worker`` reads it from stdin; :mod:`.host` says where it runs.
* :mod:`.build` - build the stages in declaration order (:class:`StageBuildError` on failure).
* :mod:`.core` - :class:`Worker`: report ready, serve, stop; composes
  :mod:`.requests` (the worker's request table), :mod:`.dispatch` (the inbox dispatcher),
  :mod:`.runner` (the stage runner) and :mod:`.forward` (the forwarder), which see each
  other through :mod:`.ports`.
* :mod:`.stage`, :mod:`.factory`, :mod:`.channel`, :mod:`.pdeath` - the stage adapter, factory
  calls, the chunk stream between stages, the parent-death watch.
"""

from .build import StageBuildError
from .core import Worker
from .entry import run_worker
from .options import WorkerOptions

__all__ = ["StageBuildError", "Worker", "WorkerOptions", "run_worker"]
