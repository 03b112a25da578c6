"""``omni serve``'s operator flags, and the OMNI_* environment variable behind every flag.

Kept out of :mod:`omni_runtime.cli` so the serving options live next to the
server that reads them; the CLI only calls :func:`add_operator_args` and
:func:`env_defaults` on its ``serve`` parser.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..cli.args import positive_float
from ..cli.selection import UserError


class EnvUsageError(UserError):
    """An OMNI_* variable or a flag holds a value the server refuses: a user mistake (exit 1)."""

    exit_code = 1


def check_env(args: argparse.Namespace) -> None:
    """Raise the OMNI_* problems :func:`env_defaults` found, once the command that reads them runs."""
    problems = list(getattr(args, "env_problems", ()))
    key, from_env = getattr(args, "api_key", None), os.environ.get("OMNI_API_KEY")
    if from_env is not None and not from_env.strip() and (key is None or key == from_env):
        # an empty key must never mean "no key": the operator asked for a guarded server
        problems.append("environment variable OMNI_API_KEY is set but empty: the server would run without authentication\n"
                        "  fix:  set a non-empty key, or unset OMNI_API_KEY for an open server")
    elif key is not None and not key.strip():
        problems.append("--api-key is empty: the server would run without authentication\n"
                        "  fix:  pass a non-empty key (e.g. --api-key \"$(openssl rand -hex 16)\"), or leave the flag out for an open server")
    if problems:
        raise EnvUsageError("omni serve: error: " + "\n".join(problems))


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def add_operator_args(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("operator options (each also read from the OMNI_<FLAG> environment variable, e.g. OMNI_API_KEY)")
    group.add_argument("--api-key", metavar="KEY", help="require 'Authorization: Bearer KEY' on every /v1 route (default: no key)")
    group.add_argument(
        "--allowed-origins", metavar="ORIGINS", type=_origins, default=(),
        help="comma-separated origins browsers may call the API from (CORS), e.g. https://app.example.com; '*' for any (default: none)",
    )
    group.add_argument("--root-path", default="", metavar="PATH", help="path prefix a reverse proxy serves this server under, e.g. /tts")
    group.add_argument("--max-body-bytes", type=positive_int, default=64 * 1024, help="largest request body; larger is a 413 (default: %(default)s)")
    group.add_argument("--body-timeout", type=positive_float, default=10.0, help="seconds a client has to send a whole body (default: %(default)s)")
    group.add_argument("--header-timeout", type=positive_float, default=10.0, help="seconds a connection has to send its request headers (default: %(default)s)")
    group.add_argument("--keep-alive-timeout", type=positive_float, default=5.0, help="seconds an idle keep-alive connection stays open (default: %(default)s)")
    group.add_argument(
        "--max-connections", type=positive_int, default=None,
        help="open connections at most; at the cap the oldest idle one is closed (default: the file-descriptor limit less a reserve)",
    )
    group.add_argument(
        "--voices-dir", metavar="DIR", default=None,
        help="where uploaded voices (POST /v1/audio/voices) and their speaker artefacts are kept across restarts (default: a temporary directory)",
    )


def env_defaults(parser: argparse.ArgumentParser) -> None:
    """Every long flag FOO-BAR of ``parser`` also reads OMNI_FOO_BAR (the flag wins); bad values are usage errors."""
    problems: list[str] = []
    for action in parser._actions:
        long = next((o for o in action.option_strings if o.startswith("--")), None)
        if long is None or action.dest == "help":
            continue
        name = "OMNI_" + long[2:].upper().replace("-", "_").replace(".", "_")
        action.help = (action.help or "") + f" [env {name}]"
        raw = os.environ.get(name)
        if raw is None or raw == "":
            continue
        try:
            if action.nargs == 0:
                value: Any = raw.lower() in ("1", "true", "yes", "on")
            elif isinstance(action, argparse._AppendAction):
                value = [(action.type or str)(v.strip()) for v in raw.split(",") if v.strip()]
            else:
                value = (action.type or str)(raw)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            problems.append(f"environment variable {name}={raw!r}: {exc}\n  fix:  set a valid value or unset it")
            continue
        if action.choices is not None and value not in action.choices:
            problems.append(f"environment variable {name}={raw!r}: choose from {', '.join(map(str, action.choices))}")
            continue
        action.default = value
    # reported when this command runs (not while --help or another command builds the parser)
    parser.set_defaults(env_problems=tuple(problems))


def _origins(text: str) -> tuple[str, ...]:
    origins = tuple(o.strip().rstrip("/") for o in text.split(",") if o.strip())
    for origin in origins:
        if origin != "*" and not origin.startswith(("http://", "https://")):
            raise argparse.ArgumentTypeError(f"origin {origin!r} must start with http:// or https:// (or be '*')")
    return origins
