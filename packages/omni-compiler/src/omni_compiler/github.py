"""``--format github``: errors as GitHub Actions workflow commands, so CI marks the line.

Each error becomes ``::error file=F,line=L,col=C,title=T::message`` (the
format omni-lint writes too); an error about a command-line flag has no file
and names the flag. Paths are made relative to the working directory (the
checkout) where they lie inside it, since GitHub links repository paths only.
"""

from __future__ import annotations

import os

from omni_config import ConfigError, ConfigFileError, ConfigIssue
from omni_config.errors import COMMAND_LINE, format_value


def annotations(error: ConfigError | ConfigFileError) -> str:
    if isinstance(error, ConfigFileError):
        return _command(error.path, error.line, error.column, "omni-compile: cannot load the file", f"{error.reason}\nfix: {error.fix}") + "\n"
    return "".join(_issue(issue) + "\n" for issue in error.issues)


def _issue(issue: ConfigIssue) -> str:
    head = issue.path + (f" = {format_value(issue.value)}" if issue.has_value else "")
    message = f"{head}: {issue.rule}\nfix: {issue.fix}"
    if issue.source == COMMAND_LINE or issue.path.startswith("-"):
        flag = issue.path if issue.path.startswith("-") or issue.path == COMMAND_LINE else f"--{issue.path}"
        return _command(None, None, None, f"omni-compile: command line {flag}", message)
    return _command(issue.source, issue.line, issue.column, f"omni-compile: {issue.path}", message)


def _command(file: str | None, line: int | None, column: int | None, title: str, message: str) -> str:
    props = []
    if file:
        props.append(f"file={_property(_relative(file))}")
        if line is not None:
            props.append(f"line={line}")
            props.append(f"col={column or 1}")
    props.append(f"title={_property(title)}")
    return f"::error {','.join(props)}::{_data(message)}"


def _relative(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith("..") else relative


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
