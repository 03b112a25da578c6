"""The parent process's side of a run: what the user's ``Runtime`` is made of.

* :mod:`.runtime` - :class:`Runtime`: composes the parts below; start, submit, health, shutdown.
* :mod:`.requests` - :class:`RequestTable`: requests in flight, finish, cancel, output credit.
* :mod:`.admission` - :class:`Admission`: the in-flight bound, deadlines, replica binding, the entry send.
* :mod:`.results` - :class:`ResultRouter`: results, chunks, ready/startup events and deaths from the workers.
* :mod:`.watch` - :class:`InstanceWatch`: instance states and "one changed" for admission.
* :mod:`.handle` - :class:`RequestHandle`, what :meth:`Runtime.submit` returns.
* :mod:`.sync` - :class:`SyncRuntime`, a blocking facade for scripts.
* :mod:`.run_guard` - the run directory's owner file and stale-run clean-up.
"""

from .handle import RequestHandle
from .runtime import Runtime
from .sync import SyncRuntime

__all__ = ["RequestHandle", "Runtime", "SyncRuntime"]
