"""How ``omni`` turns the errors it knows into an exit code and one message.

A user's mistake (config, port, output path, usage) exits 1; a tool failure
(a stage that fails to start or to run, invalid audio) exits 2; anything else
is a bug and keeps its traceback.
"""

from __future__ import annotations

from .selection import UserError


def known_error_exit(exc: BaseException) -> int | None:
    from omni_config import ConfigError, ConfigFileError

    from ..errors import RequestFailed, StartupError
    from ..serving.audio import AudioError
    from ..serving.server import BindError

    if isinstance(exc, (ConfigError, ConfigFileError, UserError, BindError)):
        return int(getattr(exc, "exit_code", 1))
    if isinstance(exc, (StartupError, RequestFailed, AudioError)):
        return 2
    return None


def known_error_text(exc: BaseException) -> str:
    from omni_config import ConfigError

    from ..errors import RequestFailed, StartupError
    from ..serving.audio import AudioError

    if isinstance(exc, ConfigError):
        return exc.render()
    if isinstance(exc, StartupError):
        return "error: " + exc.render()
    if isinstance(exc, RequestFailed):
        return f"error: the request failed: {exc}"
    if isinstance(exc, AudioError):
        return f"error: the pipeline produced invalid audio: {exc}"
    return str(exc)
