"""The per-run IPC directory and shared-memory name prefix.

Everything a run leaves on the host lives under these two names: the
``ipc://`` socket files in one private directory, and the ``/dev/shm``
segments whose names start with the run's prefix. Only the process that
created the run (the parent) removes them, with :meth:`RunDir.cleanup`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass

from omni_config.names import endpoint_name_problem

from .shm import cleanup_run, new_run_prefix, validate_prefix

_MAX_IPC_PATH = 107  # sun_path limit on Linux, minus the terminating NUL


@dataclass(frozen=True)
class RunDir:
    """The per-run IPC directory and shared-memory prefix.

    The parent creates it (:meth:`create`), passes ``path`` and
    ``shm_prefix`` to each child (plain strings; :meth:`to_dict` /
    :meth:`from_dict`), and calls :meth:`cleanup` once the children are gone
    (normal exit, error or crash) to remove the socket files and every
    shared-memory segment of the run.
    """

    path: str
    shm_prefix: str

    @classmethod
    def create(cls, base: str | None = None) -> RunDir:
        path = tempfile.mkdtemp(prefix="omni-run-", dir=base)
        os.chmod(path, 0o700)
        return cls(path, new_run_prefix())

    def address(self, name: str) -> str:
        """``ipc://`` address of the endpoint ``name`` (e.g. ``"vocoder@r1"``)."""
        problem = endpoint_name_problem(name)  # the same check omni-compile runs on every instance name
        if problem:
            raise ValueError(f"endpoint name {name!r} is invalid: {problem}")
        path = os.path.join(self.path, f"{name}.sock")
        if len(path.encode()) > _MAX_IPC_PATH:
            raise ValueError(
                f"IPC socket path {path} is {len(path.encode())} bytes, over the {_MAX_IPC_PATH}-byte "
                "Unix socket limit; use a shorter base directory (e.g. TMPDIR=/tmp) or endpoint name"
            )
        return f"ipc://{path}"

    def cleanup(self) -> list[str]:
        """Remove the directory and unlink the run's segments; returns segment names."""
        shutil.rmtree(self.path, ignore_errors=True)
        return cleanup_run(self.shm_prefix)

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "shm_prefix": self.shm_prefix}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> RunDir:
        return cls(str(data["path"]), validate_prefix(str(data["shm_prefix"])))
