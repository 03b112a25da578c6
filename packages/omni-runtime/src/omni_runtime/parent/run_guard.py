"""The run guard: removes a run's files once its owner is gone, however it ended.

Only the parent owns a run (its ``ipc://`` directory and every shared-memory
segment under its prefix); workers never remove any of it. If the parent is
SIGKILLed it cannot clean up, so at start it spawns this small process (plain
Python, no omni or torch imports: it is run as a script) and keeps the write
end of a pipe to its stdin. The parent writes ``watch <pid>`` for each worker
it starts. End of file on stdin means the parent is gone, or done: the guard
then waits for the watched workers to exit (they leave on their own when the
parent dies; past ``grace`` seconds it SIGKILLs them), removes the directory
and the segments, and exits. At a normal shutdown the parent has removed
everything already and the guard finds nothing left.

    python run_guard.py RUN_DIR SHM_PREFIX [GRACE_S]
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import time

_PREFIX = re.compile(r"^[A-Za-z0-9_.@-]{5,100}-$")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def _remove(run_dir: str, prefix: str) -> None:
    shutil.rmtree(run_dir, ignore_errors=True)
    if not _PREFIX.match(prefix):
        return
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            try:
                os.unlink(os.path.join("/dev/shm", name))
            except OSError:
                pass


class RunGuard:
    """The parent's handle on its guard process: ``watch(pid)`` each worker, ``close()`` at the end."""

    def __init__(self, run_dir: str, shm_prefix: str, grace: float = 10.0) -> None:
        import subprocess

        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__), run_dir, shm_prefix, str(grace)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            close_fds=True,
        )

    @property
    def pid(self) -> int:
        return self._proc.pid

    def watch(self, pid: int | None) -> None:
        if pid is None or self._proc.stdin is None or self._proc.stdin.closed:
            return
        try:
            self._proc.stdin.write(f"watch {pid}\n".encode())
            self._proc.stdin.flush()
        except OSError:  # the guard is gone: the parent's own cleanup still runs
            pass

    def close(self, timeout: float = 15.0) -> None:
        """End of input: the guard waits for the workers, removes what is left, and exits."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        try:
            self._proc.wait(timeout=timeout)
        except Exception:  # noqa: BLE001 - a stuck guard must not block shutdown
            self._proc.kill()
            self._proc.wait()


def main(argv: list[str]) -> int:
    run_dir, prefix = argv[0], argv[1]
    grace = float(argv[2]) if len(argv) > 2 else 10.0
    # The parent's Ctrl-C and group SIGTERM are the parent's to handle: the guard outlives them.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    watched: set[int] = set()
    for line in sys.stdin:
        parts = line.split()
        if len(parts) == 2 and parts[0] == "watch" and parts[1].isdigit():
            watched.add(int(parts[1]))
    deadline = time.monotonic() + grace
    while any(_alive(pid) for pid in watched) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in watched:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    _remove(run_dir, prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
