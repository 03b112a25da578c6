"""The parent process's side of a run: what the user's ``Runtime`` is made of.

* :mod:`.runtime` - :class:`Runtime`: start (spawn, wait ready), submit, health, shutdown.
* :mod:`.state` - the in-flight request table and what the parts share.
* :mod:`.admission` - choosing replicas and sending a request's entry payload.
* :mod:`.inbound` - results, chunks and deaths coming back from the workers.
* :mod:`.handle` - :class:`RequestHandle`, what :meth:`Runtime.submit` returns.
* :mod:`.sync` - :class:`SyncRuntime`, a blocking facade for scripts.
* :mod:`.run_guard` - the run directory's owner file and stale-run clean-up.
"""

from .handle import RequestHandle
from .runtime import Runtime
from .sync import SyncRuntime

__all__ = ["RequestHandle", "Runtime", "SyncRuntime"]
