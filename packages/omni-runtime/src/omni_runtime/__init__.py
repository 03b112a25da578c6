"""omni-runtime: run a compiled omni process topology as real OS processes.

The stage contract (what a factory returns, how stages are driven) is written once, in the
repository's ``docs/stage-contract.md``. Public API (see the package README)::

    from omni_runtime import Runtime, StagePayload, StageContext, StartupError, RequestFailed

    rt = Runtime(topology, device=None, startup_timeout=120.0, replica_policy="round_robin",
                 model_path=None, enforce_memory_fraction=False, log=print)   # model_path: omni --weights
    await rt.start()                  # prints the table, spawns, waits ready; StartupError(stage, process, traceback)
    handle = await rt.submit(data)    # the entry payload's data dict
    async for chunk in handle.stream(): ...   # terminal stage's emitted chunks, in order
    result = await handle.result()    # terminal payload data; raises RequestFailed(message)
    await handle.cancel()             # aborts the request in every stage
    handle.stage_timings              # stage -> seconds (filled when the request finishes)
    handle.queue_waits                # stage -> seconds waited in a batching stage's queue before its first step
    rt.health()                       # {"healthy": bool, "processes": {instance: "starting"|"ready"|"dead"|"stopped"}}
    rt.queue_depths()                 # {instance: in-flight requests bound to it}
    await rt.shutdown(grace=5.0)
    with Runtime.running(topology) as rt_sync:
        rt_sync.synthesize(data)      # -> dict (streamed audio chunks joined into "audio")

Also: ``Runtime(..., stage_threads=64)``, ``rt.instance_pids()``,
``handle.binding`` / ``handle.instances`` / ``handle.request_id`` / ``handle.done``,
``RequestFailed.kind`` (``stage_error``, ``invalid_request`` with ``RequestFailed.param`` when a
stage raised ``InvalidRequest(message, param=...)`` for a client mistake, ``process_died``, ``cancelled``, ``shutdown``,
``unavailable``), ``RequestCancelled`` and ``RuntimeNotRunning``, all subclasses of
``omni_runtime.errors.RuntimeFailure``. ``Runtime`` also accepts a ``PipelineConfig``
(compiled once in the constructor). A factory refuses a bad argument with
``StageConfigError(knob, value, rule, fix)``: ``start`` raises ``StartupError`` with ``.config`` set, no traceback. ``Runtime(..., shm_budget_bytes=1<<30, send_timeout=30.0)``:
per-process shared-memory budget, bound on the parent's admission send.

Behaviour choices: TP stages run one process per rank, the ranks form one torch.distributed
group at start-up (``omni_runtime.distributed``); rank 0 receives the payload and chunks and
sends downstream, the group restarts as one unit.
``handle.stage_timings`` is complete when the request finishes. Scripts that start a runtime
need ``if __name__ == "__main__":`` (workers use the ``spawn`` start method).
"""

from typing import TYPE_CHECKING, Any

from .context import StageContext
from .errors import InvalidRequest, RequestCancelled, RequestFailed, RuntimeFailure, RuntimeNotRunning, StageConfigError, StartupError
from .payload import StagePayload

if TYPE_CHECKING:
    from .parent.handle import RequestHandle
    from .parent.runtime import Runtime
    from .parent.sync import SyncRuntime

__version__ = "0.1.0"

__all__ = [
    "InvalidRequest",
    "RequestCancelled",
    "RequestFailed",
    "RequestHandle",
    "Runtime",
    "RuntimeFailure",
    "RuntimeNotRunning",
    "StageConfigError",
    "StageContext",
    "StagePayload",
    "StartupError",
    "SyncRuntime",
]

_PARENT = {"RequestHandle": "handle", "Runtime": "runtime", "SyncRuntime": "sync"}


def __getattr__(name: str) -> Any:
    """The parent's classes load on first use: stage code and ``omni_runtime.errors`` stay light (no compiler)."""
    module = _PARENT.get(name)
    if module is None:
        raise AttributeError(f"module 'omni_runtime' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".parent.{module}", __name__), name)
    globals()[name] = value
    return value
