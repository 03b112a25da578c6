"""Logging for the parent and every worker: stdlib ``logging``, one line per event.

Every line carries the time, the level, the process instance (``parent``,
``vocoder@r1``) and the stage it is about (``-`` when none), as text or as
one JSON object per line (``--log-format json``). A worker formats its own
records and writes them to its stderr with a leading :data:`MARK`; the parent
passes such lines through unchanged and wraps anything else a worker prints
(model code, C libraries, a crash) in a record of its own naming the instance.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from typing import Any, TextIO

MARK = "\x1e"
"""Starts a line that a worker's logging already formatted (ASCII record separator)."""

LEVELS = ("critical", "error", "warning", "info", "debug")
FORMATS = ("text", "json")

current_stage: contextvars.ContextVar[str] = contextvars.ContextVar("omni_stage", default="-")
"""The stage the running code works for; set by the worker around each stage call."""

_instance = "parent"


class _ContextFilter(logging.Filter):
    """Fills ``instance`` and ``stage`` on records that do not name them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "instance"):
            record.instance = _instance
        if not hasattr(record, "stage"):
            record.stage = current_stage.get()
        return True


class TextFormatter(logging.Formatter):
    """``2026-12-01T04:10:00.123Z INFO    parent - message`` (a traceback follows on its own lines)."""

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "preformatted", False):
            return record.getMessage()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        line = f"{stamp} {record.levelname:<7} {record.instance} {record.stage} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, instance, stage, logger, message (+ traceback, + fields)."""

    _STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "instance", "stage", "preformatted", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "preformatted", False):
            return record.getMessage()
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "instance": record.instance,
            "stage": record.stage,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in self._STANDARD and not key.startswith("_"):
                out[key] = value if isinstance(value, (str, int, float, bool, type(None))) else str(value)
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


class _MarkedStream:
    """A worker's log destination: each formatted record is one marked line on stderr (tracebacks joined)."""

    def __init__(self, stream: TextIO, fmt: str) -> None:
        self._stream = stream
        self._json = fmt == "json"

    def write(self, text: str) -> None:
        if not text or text == "\n":
            return
        if not self._json:
            # One record, one line: the parent splits its input on newlines.
            text = text.rstrip("\n").replace("\n", "\n" + MARK + "  ")
        self._stream.write(MARK + text.rstrip("\n") + "\n")

    def flush(self) -> None:
        self._stream.flush()


def configure(level: str = "info", fmt: str = "text", instance: str = "parent", stream: TextIO | None = None, marked: bool = False) -> None:
    """Set up the root logger of this process (idempotent: replaces omni's own handler)."""
    global _instance
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    _instance = instance
    target: Any = stream if stream is not None else sys.stderr
    if marked:
        target = _MarkedStream(target, fmt)
    handler = logging.StreamHandler(target)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(_ContextFilter())
    handler.set_name("omni")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "omni"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in ("uvicorn.access",):
        logging.getLogger(noisy).propagate = False


def pass_through(line: str, instance: str, stream: str) -> None:
    """Log one line a worker wrote: its own formatted record as is, anything else wrapped with its instance."""
    logger = logging.getLogger("omni.worker.output")
    if line.startswith(MARK):
        record = logger.makeRecord(logger.name, logging.INFO, "", 0, line[1:].replace("\n" + MARK, "\n"), None, None)
        record.preformatted = True
        record.instance = instance
        record.stage = "-"
        logger.handle(record)
        return
    level = logging.WARNING if stream == "stderr" else logging.INFO
    logger.log(level, "%s", line, extra={"instance": instance, "stage": "-", "stream": stream})
