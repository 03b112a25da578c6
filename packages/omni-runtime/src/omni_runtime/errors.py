"""Errors the runtime raises to its caller."""

from __future__ import annotations


class RuntimeFailure(Exception):
    """Base class of every omni-runtime error."""


class StartupError(RuntimeFailure):
    """A process failed to build its stages (or never reported ready).

    Carries the stage being built, the OS process it was built in and the
    child's formatted traceback so the user sees where and why, not a bare
    "child exited".
    """

    def __init__(self, stage: str | None, process: str, traceback: str, reason: str | None = None) -> None:
        self.stage = stage
        self.process = process
        self.traceback = traceback
        self.reason = reason or (traceback.strip().splitlines()[-1] if traceback.strip() else "failed to start")
        where = f"stage {stage} (process {process})" if stage else f"process {process}"
        super().__init__(f"{where} failed to start: {self.reason}")

    def render(self) -> str:
        """The message plus the child's traceback, for a terminal."""
        return f"{self}\n{self.traceback.rstrip()}" if self.traceback else str(self)


class RequestFailed(RuntimeFailure):
    """A request did not complete: a stage raised, a process died, it was cancelled or the runtime stopped.

    ``str(error)`` is the user-facing message, for a stage error
    ``stage <name> (process <process>): <Type>: <message>``.
    """

    def __init__(self, message: str, *, stage: str | None = None, process: str | None = None, kind: str = "stage_error") -> None:
        super().__init__(message)
        self.message = message
        self.stage = stage
        self.process = process
        self.kind = kind
        self.param: str | None = None
        """The request field at fault when ``kind`` is ``invalid_request`` (from :class:`InvalidRequest`)."""
        self.detail = ""
        """The stage's formatted traceback, for logs (never shown to API clients)."""
        """One of ``stage_error``, ``invalid_request``, ``process_died``, ``cancelled``, ``shutdown``, ``unavailable``, ``deadline``, ``overloaded``."""


class InvalidRequest(ValueError):
    """A stage's verdict that the request itself is wrong (unknown voice, nothing to speak, too long).

    Stages raise it instead of a bare ``ValueError`` for mistakes the client can fix; the
    runtime carries ``param`` back, so ``RequestFailed.kind`` is ``invalid_request`` and the
    HTTP server answers 400 naming the field rather than a 500 the client would retry.
    """

    def __init__(self, message: str, *, param: str = "input") -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class RequestCancelled(RequestFailed):
    """The request was cancelled (``handle.cancel()``, client disconnect)."""

    def __init__(self, message: str = "request cancelled") -> None:
        super().__init__(message, kind="cancelled")


class Overloaded(RequestFailed):
    """``max_inflight`` requests are in flight: the request was refused at once (HTTP 429); retry later."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="overloaded")


class RuntimeNotRunning(RuntimeFailure):
    """``submit`` was called before ``start`` or after ``shutdown`` began."""
