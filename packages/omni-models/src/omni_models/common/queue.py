"""``PreparedRequestQueue``: the process-local handoff of MOSS-TTS from preprocessing to the AR stage.

Preprocessing ``begin``s a request, prepares it, and ``publish``es the prepared object; the AR
stage ``pop``s it. Publishing is fail-closed: publishing a request that was never begun, was
aborted, or was already published raises, so a late or duplicate producer can never hand the
engine stale state. The object lives in process memory, which is why the model declares
``preprocessing -> tts_engine`` process-local: in another process the queue is empty and
``pop`` raises an error naming the edge instead of silently rebuilding the request.

The stage contract has no per-stage abort hook, so a request cancelled between the two stages
would leave its slot behind; slots older than ``max_age_s`` are dropped on the next ``begin``
(and a late ``pop`` for one says it expired).
"""

from __future__ import annotations

import threading
import time
from typing import Any


class HandoffError(RuntimeError):
    """A process-local handoff found no state: the stages were split, or the request was aborted."""


class PreparedRequestQueue:
    """Thread-safe map of request id -> prepared request with begin/publish/abort/pop."""

    _PENDING = object()
    #: How many recently aborted or expired ids are remembered for precise error messages.
    GONE_MEMORY = 4096

    def __init__(self, model: str, src: str = "preprocessing", dst: str = "tts_engine", max_age_s: float = 600.0):
        self.model, self.src, self.dst, self.max_age_s = model, src, dst, max_age_s
        self._lock = threading.Condition()
        self._slots: dict[str, tuple[float, Any]] = {}
        self._gone: dict[str, str] = {}

    def _forget(self, request_id: str, why: str) -> None:
        self._slots.pop(request_id, None)
        self._gone[request_id] = why
        while len(self._gone) > self.GONE_MEMORY:
            del self._gone[next(iter(self._gone))]

    def _prune(self) -> None:
        deadline = time.monotonic() - self.max_age_s
        for rid in [rid for rid, (t, _) in self._slots.items() if t < deadline]:
            self._forget(rid, f"it expired after {self.max_age_s:g} s unconsumed")

    def begin(self, request_id: str) -> None:
        with self._lock:
            self._prune()
            if request_id in self._slots:
                raise HandoffError(f"{self.model}: request {request_id} was already begun in the prepared-request queue")
            self._gone.pop(request_id, None)
            self._slots[request_id] = (time.monotonic(), self._PENDING)

    def publish(self, request_id: str, prepared: Any) -> None:
        with self._lock:
            if request_id in self._gone:
                raise HandoffError(f"{self.model}: cannot publish request {request_id}: {self._gone[request_id]}")
            if request_id not in self._slots:
                raise HandoffError(f"{self.model}: cannot publish request {request_id}: begin() was not called for it")
            began, state = self._slots[request_id]
            if state is not self._PENDING:
                raise HandoffError(f"{self.model}: request {request_id} was already published")
            self._slots[request_id] = (began, prepared)
            self._lock.notify_all()

    def abort(self, request_id: str) -> bool:
        """Drop the request's slot; a later publish raises. True if there was a slot."""
        with self._lock:
            existed = request_id in self._slots
            self._forget(request_id, "it was aborted")
            self._lock.notify_all()
            return existed

    def pop(self, request_id: str, timeout: float = 0.0) -> Any:
        """Take the published request, waiting up to ``timeout`` seconds for a begun one."""
        with self._lock:
            self._lock.wait_for(lambda: self._slots.get(request_id, (0, None))[1] is not self._PENDING, timeout)
            slot = self._slots.get(request_id)
            if slot is None or slot[1] is self._PENDING:
                why = self._gone.get(request_id, "nothing was published for it in this process")
                raise HandoffError(
                    f"{self.model}: no prepared request for {request_id} ({why}): the handoff {self.src} -> {self.dst} "
                    f"is process-local; keep both stages in one process"
                )
            del self._slots[request_id]
            return slot[1]

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)

    def __contains__(self, request_id: object) -> bool:
        with self._lock:
            return request_id in self._slots
