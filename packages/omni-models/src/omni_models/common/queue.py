"""``PreparedRequestQueue``: the process-local handoff of MOSS-TTS from preprocessing to the AR stage.

Preprocessing ``begin``s a request, prepares it, and ``publish``es the prepared object; the AR
stage ``pop``s it. Publishing is fail-closed: publishing a request that was never begun, was
aborted, or was already published raises, so a late or duplicate producer can never hand the
engine stale state. The object lives in process memory, which is why the model declares
``preprocessing -> tts_engine`` process-local: in another process the queue is empty and
``pop`` raises an error naming the edge instead of silently rebuilding the request.
"""

from __future__ import annotations

import threading
from typing import Any


class HandoffError(RuntimeError):
    """A process-local handoff found no state: the stages were split, or the request was aborted."""


class PreparedRequestQueue:
    """Thread-safe map of request id -> prepared request with begin/publish/abort/pop."""

    _PENDING = object()
    ABORTED_MEMORY = 4096

    def __init__(self, model: str, src: str = "preprocessing", dst: str = "tts_engine"):
        self.model, self.src, self.dst = model, src, dst
        self._lock = threading.Condition()
        self._slots: dict[str, Any] = {}
        # Recently aborted ids (bounded), so a late publish for them fails closed with a clear reason.
        self._aborted: dict[str, None] = {}

    def begin(self, request_id: str) -> None:
        with self._lock:
            if request_id in self._slots:
                raise HandoffError(f"{self.model}: request {request_id} was already begun in the prepared-request queue")
            self._aborted.pop(request_id, None)
            self._slots[request_id] = self._PENDING

    def publish(self, request_id: str, prepared: Any) -> None:
        with self._lock:
            if request_id in self._aborted:
                raise HandoffError(f"{self.model}: cannot publish request {request_id}: it was aborted")
            if request_id not in self._slots:
                raise HandoffError(f"{self.model}: cannot publish request {request_id}: begin() was not called for it")
            if self._slots[request_id] is not self._PENDING:
                raise HandoffError(f"{self.model}: request {request_id} was already published")
            self._slots[request_id] = prepared
            self._lock.notify_all()

    def abort(self, request_id: str) -> bool:
        """Drop the request's slot; a later publish raises. True if there was a slot."""
        with self._lock:
            existed = request_id in self._slots
            self._slots.pop(request_id, None)
            self._aborted[request_id] = None
            while len(self._aborted) > self.ABORTED_MEMORY:
                del self._aborted[next(iter(self._aborted))]
            self._lock.notify_all()
            return existed

    def pop(self, request_id: str, timeout: float = 0.0) -> Any:
        """Take the published request, waiting up to ``timeout`` seconds for a begun one."""
        with self._lock:
            self._lock.wait_for(lambda: self._slots.get(request_id, None) is not self._PENDING, timeout)
            state = self._slots.get(request_id, self._PENDING)
            if request_id not in self._slots or state is self._PENDING:
                why = "it was aborted" if request_id in self._aborted else "nothing was published for it in this process"
                raise HandoffError(
                    f"{self.model}: no prepared request for {request_id} ({why}): the handoff {self.src} -> {self.dst} "
                    f"is process-local; keep both stages in one process"
                )
            del self._slots[request_id]
            return state

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)

    def __contains__(self, request_id: object) -> bool:
        with self._lock:
            return request_id in self._slots
