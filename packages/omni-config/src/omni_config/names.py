"""What the runtime and the operating system accept as names, as plain predicates.

The compiler refuses a config the runtime would refuse at start-up, so these
checks live here, where omni-config, the compiler and the runtime all reach
them without importing each other: the runtime's own endpoint check
(``RunDir.address``) calls :func:`endpoint_name_problem`, and the stage ``env``
rules are what ``os.environ`` refuses (``putenv`` with an empty name, an ``=``
in a name, a NUL byte, text the file system encoding cannot hold).
Each returns ``None`` when the value is fine, else the rule it breaks.
"""

from __future__ import annotations

import os
import re

#: An OS process's endpoint (IPC socket) name: ``<process>[_tp<rank>][@r<replica>]``.
ENDPOINT_NAME_MAX = 64
_ENDPOINT_NAME = re.compile(r"[A-Za-z0-9_.@-]+")


def endpoint_name_problem(name: object) -> str | None:
    if not isinstance(name, str) or not name:
        return "an endpoint name must be a non-empty string"
    if len(name) > ENDPOINT_NAME_MAX:
        return f"the OS process name {name!r} is {len(name)} characters; the runtime's limit is {ENDPOINT_NAME_MAX}"
    if not _ENDPOINT_NAME.fullmatch(name):
        return "an endpoint name may contain only letters, digits, '_', '.', '@' and '-'"
    return None


def env_name_problem(name: object) -> str | None:
    if not isinstance(name, str) or not name:
        return "an environment variable name must be a non-empty string"
    if "=" in name:
        return "an environment variable name cannot contain '=' (the OS splits NAME=VALUE at the first '=')"
    return _os_text_problem(name, "an environment variable name")


def env_value_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return "an environment variable value must be a string"
    return _os_text_problem(value, "an environment variable value")


def _os_text_problem(text: str, what: str) -> str | None:
    if "\0" in text:
        return f"{what} cannot contain a NUL character"
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return f"{what} must be text the operating system can encode"
    return None
