"""The local backend: each worker is an OS process on this host, spawned with ``python -m omni_runtime.worker``.

The launch JSON goes in on the child's stdin (nothing on the command line,
no pickle). The child's stdout and stderr come back through pipes: lines its
logging formatted pass through to this process's log, anything else is logged
with the instance's name, so a crash's last words are never lost. Exit is
observed through a pidfd on the event loop (no polling, no reaper thread), so
a killed worker is noticed at once; the child is reaped when it is noticed.
Children stay in the parent's process group, so a terminal's Ctrl-C or a
group SIGTERM reaches them too (workers ignore SIGINT and report SIGTERM to
the parent instead of dying).

Workers run at a lower CPU priority than the parent (``worker_nice``, default
:data:`DEFAULT_WORKER_NICE`, ``omni serve --worker-nice``): the parent is the
control plane (accepting connections, admitting or refusing requests, routing
results) and must not queue behind compute when the machine's cores are busy.
On a GPU server the workers wait on the GPU and lose nothing; on a saturated
CPU host the parent's event loop stays responsive (cluster schedulers run
their workers at a raised niceness for the same reason).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import threading

from .. import logs
from .backend import Backend, LaunchedWorker
from .spec import ExitInfo, WorkerLaunch

DEFAULT_WORKER_NICE = 10
"""How much lower than the parent's a worker's CPU priority is (added to its nice value, 0-19)."""


class LocalWorker(LaunchedWorker):
    """A spawned worker process and the watches on its pidfd and output pipes."""

    def __init__(self, instance: str, proc: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> None:
        self.instance = instance
        self.proc = proc
        self.pid = proc.pid
        self.exited = loop.create_future()
        self._loop = loop
        self._pidfd: int | None = None
        self._partial: dict[str, bytes] = {"stdout": b"", "stderr": b""}
        for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
            loop.add_reader(pipe.fileno(), self._on_output, name, pipe)
        try:
            self._pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # no pidfd (old kernel): one thread waits instead
            threading.Thread(target=self._wait_in_thread, name=f"omni-wait-{instance}", daemon=True).start()
        else:
            loop.add_reader(self._pidfd, self._on_exit)

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(OSError):
                self.proc.kill()

    def kill_now_sync(self) -> None:
        self.kill()
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            self.proc.wait(timeout=2.0)

    def _on_exit(self) -> None:
        assert self._pidfd is not None
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = None
        self._finish(self.proc.wait())

    def _wait_in_thread(self) -> None:
        code = self.proc.wait()
        with contextlib.suppress(RuntimeError):  # loop closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._finish, code)

    def _finish(self, code: int) -> None:
        if not self.exited.done():
            self.exited.set_result(ExitInfo(code))

    def _on_output(self, name: str, pipe) -> None:
        try:
            data = os.read(pipe.fileno(), 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._loop.remove_reader(pipe.fileno())
            pipe.close()
            rest = self._partial.pop(name, b"")
            if rest:
                logs.pass_through(rest.decode(errors="replace"), self.instance, name)
            return
        buffered = self._partial.get(name, b"") + data
        *lines, rest = buffered.split(b"\n")
        self._partial[name] = rest[-65536:]
        for line in lines:
            logs.pass_through(line.decode(errors="replace"), self.instance, name)

    def close(self) -> None:
        """Stop watching (the loop is going away)."""
        if self._pidfd is not None:
            with contextlib.suppress(ValueError, OSError, RuntimeError):
                self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None and not pipe.closed:
                with contextlib.suppress(ValueError, OSError, RuntimeError):
                    self._loop.remove_reader(pipe.fileno())
                pipe.close()


class LocalBackend(Backend):
    """Spawn each worker as ``python -m omni_runtime.worker`` on this host."""

    name = "local"

    def __init__(self, worker_nice: int = DEFAULT_WORKER_NICE, **options: object) -> None:
        if options:
            raise ValueError(f"the local backend takes only worker_nice, got {', '.join(sorted(options))}")
        if not 0 <= worker_nice <= 19:
            raise ValueError(f"worker_nice must be 0 to 19, got {worker_nice}")
        self.workers: list[LocalWorker] = []
        nice = shutil.which("nice") if worker_nice else None
        if worker_nice and nice is None:
            logging.getLogger("omni.runtime").warning("worker_nice %d: no `nice` program on PATH, workers run at the parent's CPU priority", worker_nice)
        # `nice` execs the worker (same pid), so every thread it starts inherits the priority
        self._command = [*([nice, "-n", str(worker_nice)] if nice else []), sys.executable, "-m", "omni_runtime.worker"]

    async def launch(self, launch: WorkerLaunch) -> LocalWorker:
        loop = asyncio.get_running_loop()
        proc = subprocess.Popen(
            self._command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=True,
        )
        worker = LocalWorker(launch.instance, proc, loop)
        self.workers.append(worker)
        data = launch.to_json().encode()
        assert proc.stdin is not None
        # A large topology may not fit the pipe buffer: write off the loop.
        await loop.run_in_executor(None, _write_and_close, proc.stdin, data)
        return worker

    async def close(self) -> None:
        for worker in self.workers:
            worker.close()
        self.workers.clear()


def _write_and_close(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except (BrokenPipeError, OSError):  # the child died before reading: its exit is reported as usual
        with contextlib.suppress(OSError):
            pipe.close()
