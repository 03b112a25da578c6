"""Argument types and options that several ``omni`` subcommands share.

``serve``, ``synthesize``, ``bench`` and ``topology`` take the same backend
options and the same kinds of numbers; keeping them here gives every command
the same words, defaults and error messages.
"""

from __future__ import annotations

import argparse
from typing import Any

from .selection import UserError


def add_backend_args(parser: argparse.ArgumentParser) -> None:
    """``--backend local|ray`` and ``--ray-address`` (shared by serve, synthesize, bench and topology)."""
    parser.add_argument(
        "--backend",
        choices=["local", "ray"],
        default="local",
        help="local: one OS process per instance on this machine; ray: one Ray actor per instance, "
        "placed from processes.<P>.ray (needs omni-runtime[ray]) (default: %(default)s)",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        default=None,
        help="Ray cluster to join, as ray.init takes it ('auto', 'HOST:6379'); without it a local Ray is started and stopped with the run",
    )


def backend_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``Runtime`` keyword arguments for the chosen backend; a usage mistake is a :class:`UserError`."""
    backend = getattr(args, "backend", "local")
    address = getattr(args, "ray_address", None)
    if address is not None and backend != "ray":
        raise UserError(f"error: --ray-address {address}\n  rule: it names a Ray cluster, used only with --backend ray\n  fix:  add --backend ray, or drop --ray-address")
    if backend == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise UserError("error: --backend ray\n  rule: Ray is not installed in this environment\n  fix:  pip install 'omni-runtime[ray]'")
    nice = getattr(args, "worker_nice", None)
    return {"backend": backend, "ray_address": address, **({"worker_nice": nice} if backend == "local" and nice is not None else {})}


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def positive_float(text: str) -> float:
    value = nonnegative_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def nonnegative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, got {text}")
    return value
