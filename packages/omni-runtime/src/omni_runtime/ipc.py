"""Per-run IPC directory and ZeroMQ endpoints.

Every run gets its own private directory (mode 0700) for ``ipc://`` sockets, so
two runtimes on one host never collide and removing the directory removes
every endpoint. Socket files are named by instance index, not by name, to stay
far below the ~107-byte limit of a Unix socket path.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import zmq

from omni_compiler.topology import CompiledTopology

PARENT = "parent"


def make_run_dir() -> str:
    base = os.environ.get("OMNI_RUNTIME_IPC_DIR") or tempfile.gettempdir()
    return tempfile.mkdtemp(prefix="omni-run-", dir=base)


def remove_run_dir(run_dir: str) -> None:
    shutil.rmtree(run_dir, ignore_errors=True)


def endpoint(run_dir: str, topology: CompiledTopology, instance: str) -> str:
    if instance == PARENT:
        return f"ipc://{run_dir}/p.sock"
    for index, inst in enumerate(topology.instances):
        if inst.name == instance:
            return f"ipc://{run_dir}/w{index}.sock"
    raise KeyError(instance)


def push_socket(ctx: zmq.Context, address: str) -> zmq.Socket:
    """A PUSH socket to one peer: never drops, never lingers at close."""
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 0)
    sock.connect(address)
    return sock


def pull_socket(ctx: zmq.Context, address: str) -> zmq.Socket:
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVHWM, 0)
    sock.bind(address)
    return sock
