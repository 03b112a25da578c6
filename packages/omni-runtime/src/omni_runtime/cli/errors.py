"""How ``omni`` turns the errors it knows into an exit code and one message.

Exit 1: a mistake in what the user passed, fixed by changing it: a flag or
OMNI_* variable, a config file (unreadable, unsafe or invalid), an unknown model
name, a port, an output path, or a request a stage refuses (an unknown voice,
text it cannot speak). Exit 2: a failure of the tool or the pipeline: a stage
that fails to start or to run, invalid audio, out of memory. Anything else is a
bug and keeps its traceback. (``omni-compile`` keeps its own documented codes.)
"""

from __future__ import annotations

from .selection import UserError


def known_error_exit(exc: BaseException) -> int | None:
    from omni_config import ConfigError, ConfigFileError

    from ..errors import RequestFailed, StartupError
    from ..raycluster.launcher import RayConnectError
    from ..serving.audio import AudioError
    from ..serving.server import BindError

    if isinstance(exc, (ConfigError, ConfigFileError, UserError, BindError, RayConnectError)):
        return 1
    if isinstance(exc, RequestFailed) and getattr(exc, "kind", None) == "invalid_request":
        return 1  # the stage's verdict on the request: an unknown voice, text it cannot speak
    if isinstance(exc, (StartupError, RequestFailed, AudioError, MemoryError)):
        return 2
    return None


_FLAGS = {"voice": "--voice", "speed": "--speed", "input": "the text", "text": "the text"}


def known_error_text(exc: BaseException) -> str:
    from omni_config import ConfigError

    from ..errors import RequestFailed, StartupError
    from ..serving.audio import AudioError

    if isinstance(exc, ConfigError):
        return exc.render()
    if isinstance(exc, StartupError):
        return "error: " + exc.render()
    if isinstance(exc, RequestFailed) and getattr(exc, "kind", None) == "invalid_request":
        param = getattr(exc, "param", None)
        return f"error: the pipeline refused the request{f' ({param})' if param else ''}: {exc}\n  fix:  change {_FLAGS.get(param or '', 'the request')}"
    if isinstance(exc, RequestFailed):
        return f"error: the request failed: {exc}"
    if isinstance(exc, AudioError):
        return f"error: the pipeline produced invalid audio: {exc}"
    if isinstance(exc, MemoryError):  # a traceback would need memory too, and says nothing the user can act on
        return ("error: out of memory in the omni process\n"
                "  fix:  check the config for very large values (factory_args, aliases) and the machine's free memory")
    return str(exc)
