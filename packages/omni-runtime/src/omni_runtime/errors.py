"""Errors the runtime raises to its caller."""

from __future__ import annotations

from typing import Any


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
        self.config: StageConfigError | None = None
        """Set when a factory refused one of its arguments (:class:`StageConfigError`): the user's
        mistake, reported without a traceback (``omni`` exits 1)."""

    @classmethod
    def bad_value(cls, stage: str | None, process: str, error: StageConfigError) -> StartupError:
        """The startup error of a stage whose factory raised :class:`StageConfigError` (no traceback)."""
        startup = cls(stage, process, "", reason=error.summary())
        startup.config = error
        return startup

    def render(self) -> str:
        """The message plus the child's traceback, for a terminal."""
        return f"{self}\n{self.traceback.rstrip()}" if self.traceback else str(self)


MAX_VALUE_CHARS = 200
"""How much of a refused value a message quotes: a value may be a 64 KiB string."""


def quote_value(value: Any) -> str:
    text = repr(value[: MAX_VALUE_CHARS + 1] if isinstance(value, str) else value)
    return text if len(text) <= MAX_VALUE_CHARS else f"{text[:MAX_VALUE_CHARS]}... ({len(value) if isinstance(value, str) else len(text)} characters)"


class StageConfigError(ValueError):
    """A stage factory's verdict that one of its arguments is wrong: the user's mistake, not a fault.

    Raised for a value only the build can judge (an espeak voice that is not installed, a
    ``codec_device`` naming a GPU that is not there, a ``--weights`` directory that does not fit
    the model). ``knob`` is the ``factory_args`` key (``default_voice``), or ``model_path`` for
    ``--weights``. The worker reports it without a traceback, the parent raises
    :class:`StartupError` with ``config`` set and ``omni`` prints the path
    (``stages.<stage>.factory_args.<knob>``), the value, the rule and the fix, exit 1. A factory
    that raises anything else is at fault itself: its traceback is shown and ``omni`` exits 2.
    """

    def __init__(self, knob: str, value: Any, rule: str, fix: str, *, path: str | None = None, more: tuple[StageConfigError, ...] = ()) -> None:
        self.more = tuple(more)
        """Further independent problems found in the same check (every one is reported at once)."""
        self.knob = knob
        self.value = value
        self.rule = rule
        self.fix = fix
        self.path = path or f"factory_args.{knob}"
        """Where the value was set; the worker fills in the stage (:meth:`at`)."""
        super().__init__(f"{self.path} = {quote_value(value)}: {rule}; fix: {fix}")

    def at(self, stage: str, factory_args: dict[str, Any], model_path: str | None = None) -> StageConfigError:
        """This error with its full path: ``stages.<stage>.factory_args.<knob>``, or ``--weights``
        for a ``model_path`` the runtime injected (the stage's factory_args do not set it)."""
        value = self.value
        if self.knob == "model_path" and "model_path" not in factory_args:
            path = "--weights"
            value = model_path if value is None else value
        else:
            path = f"stages.{stage}.factory_args.{self.knob}"
        more = tuple(other.at(stage, factory_args, model_path) for other in self.more)
        return StageConfigError(self.knob, value, self.rule, self.fix, path=path, more=more)

    @property
    def issues(self) -> tuple[StageConfigError, ...]:
        """This problem and every further one (``more``), each with its own path, value, rule and fix."""
        return (self, *self.more)

    def summary(self) -> str:
        return f"{self.path} = {quote_value(self.value)}: {self.rule}"

    def to_dict(self) -> dict[str, Any]:
        """For the worker's startup report (codec types only; a long value is cut)."""
        value = self.value if isinstance(self.value, (str, int, float, bool, type(None))) else quote_value(self.value)
        if isinstance(value, str) and len(value) > 4 * MAX_VALUE_CHARS:
            value = value[: 4 * MAX_VALUE_CHARS]
        return {"knob": self.knob, "value": value, "rule": self.rule, "fix": self.fix, "path": self.path, "more": [m.to_dict() for m in self.more]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageConfigError:
        more = tuple(cls.from_dict(m) for m in data.get("more") or () if isinstance(m, dict))
        return cls(str(data.get("knob", "")), data.get("value"), str(data.get("rule", "")), str(data.get("fix", "")), path=str(data.get("path") or "") or None, more=more)


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


class AppendRefused(RuntimeFailure):
    """``RequestHandle.append`` could not add input to the request; nothing was sent.

    ``reason``: ``not_supported`` (the model's entry stage has no ``append`` hook: send the
    whole input in one request), ``finished`` (the request already ended) or ``input_closed``
    (``append(..., final=True)`` or ``close_input()`` was called before).
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
