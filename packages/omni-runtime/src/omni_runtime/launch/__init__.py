"""How worker processes are started: the backend seam under the supervisor.

* :mod:`.spec` - :class:`WorkerLaunch` (the JSON a worker is started with) and
  :class:`ExitInfo` (how it ended).
* :mod:`.backend` - the interface: :class:`Backend` ``.launch(launch) ->``
  :class:`LaunchedWorker` (``.exited`` future, ``.kill()``).
* :mod:`.local` - :class:`LocalBackend`, spawned OS processes on this host.
"""

from .backend import Backend, LaunchedWorker
from .local import LocalBackend
from .spec import ExitInfo, WorkerLaunch

__all__ = ["Backend", "ExitInfo", "LaunchedWorker", "LocalBackend", "WorkerLaunch"]
