"""How worker processes are started: the backend seam under the supervisor.

* :mod:`.spec` - :class:`WorkerLaunch` (the JSON a worker is started with) and
  :class:`ExitInfo` (how it ended).
* :mod:`.backend` - the interface: :class:`Backend` ``.open(run, setup) -> plane``,
  ``.launch(launch) ->`` :class:`LaunchedWorker` (``.exited`` future, ``.kill()``),
  ``.ready(instance, endpoint)``.
* :mod:`.local` - :class:`LocalBackend`, spawned OS processes on this host.
* :mod:`.registry` - :func:`backend_named`, a backend by the name an operator gives.
"""

from .backend import Backend, LaunchedWorker, RunSetup
from .local import LocalBackend
from .registry import backend_named, backend_names
from .spec import ExitInfo, WorkerLaunch

__all__ = ["Backend", "ExitInfo", "LaunchedWorker", "LocalBackend", "RunSetup", "WorkerLaunch", "backend_named", "backend_names"]
