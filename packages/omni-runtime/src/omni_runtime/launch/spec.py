"""What a backend is given to start one worker, and what it reports when the worker is gone.

Both are plain JSON-able values: a backend may start the worker anywhere (a
spawned process here, an actor on another node) as long as it ends up
calling :func:`omni_runtime.worker.entry.run_worker` with
:meth:`WorkerLaunch.to_json`.
"""

from __future__ import annotations

import json
import signal
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class WorkerLaunch:
    """Everything one worker needs, as JSON (no pickled user objects cross the boundary).

    ``topology`` is the compiled topology's JSON, ``instance`` the process
    instance to host (``vocoder@r1``), ``run`` the run directory's
    ``RunDir.to_dict()``, ``options`` the ``WorkerOptions`` as a dict.
    ``parent_pid``: the owner process to watch on this host (the worker exits
    when it dies); ``None`` where the backend ties the worker's life to the
    owner itself (a cluster actor). ``sys_path``: import path entries the worker
    adds (a local child sees what the parent could import). ``attempt``: 0
    for the first start, then the restart count (for logs).
    """

    topology: str
    instance: str
    run: dict[str, str]
    options: dict[str, Any]
    parent_pid: int | None = None
    sys_path: tuple[str, ...] = ()
    attempt: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerLaunch:
        data = json.loads(text)
        data["sys_path"] = tuple(data.get("sys_path") or ())
        return cls(**data)


@dataclass(frozen=True)
class ExitInfo:
    """How a worker ended: an exit status (negative: the signal that killed it), or a backend's words."""

    code: int | None
    detail: str = field(default="")

    @property
    def signal_name(self) -> str | None:
        if self.code is None or self.code >= 0:
            return None
        try:
            return signal.Signals(-self.code).name
        except ValueError:
            return f"signal {-self.code}"

    @property
    def reason(self) -> str:
        """Short cause for logs and metric labels: ``SIGKILL``, ``exit 1``, or the backend's detail."""
        if self.signal_name:
            return self.signal_name
        if self.code is not None:
            return f"exit {self.code}"
        return self.detail or "unknown"

    def describe(self) -> str:
        """``was killed by SIGKILL`` / ``exited with code 1`` (a sentence's verb phrase)."""
        if self.signal_name:
            return f"was killed by {self.signal_name}"
        if self.code is not None:
            return f"exited with code {self.code}"
        return f"ended ({self.detail})" if self.detail else "ended"
