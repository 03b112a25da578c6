"""The OS process that hosts one process instance's stages.

* :mod:`.entry` - ``main``, what the parent spawns (JSON arguments only).
* :mod:`.build` - build the stages in declaration order (:class:`StageBuildError` on failure).
* :mod:`.core` - :class:`Worker`: report ready, serve, stop; assembled from
  :mod:`.inbound` (messages in), :mod:`.execution` (running stages) and
  :mod:`.outbound` (output on), sharing :mod:`.state`.
"""

from .build import StageBuildError
from .core import Worker
from .entry import main
from .options import WorkerOptions

__all__ = ["StageBuildError", "Worker", "WorkerOptions", "main"]
