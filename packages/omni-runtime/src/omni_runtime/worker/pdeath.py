"""Make a worker die with its parent, so a killed server leaves no orphan.

Two mechanisms, because either alone has a gap: ``prctl(PR_SET_PDEATHSIG)``
has the kernel signal us the instant the parent dies (Linux only, and tied to
the parent *thread* that spawned us), and a watchdog thread notices a changed
``getppid()`` on any POSIX system. The kernel signal is one of our own
(:data:`PARENT_DEATH_SIGNAL`, a real-time signal nothing else sends), so a
SIGTERM from an operator or from systemd is never mistaken for the parent's
death. Both end the process at once; the run's files are the parent's (its
run guard removes them), never the worker's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading

_PR_SET_PDEATHSIG = 1
PARENT_DEATH_SIGNAL = signal.SIGRTMIN + 6
"""Delivered by the kernel when the parent dies; used for nothing else."""


def _arm_prctl(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0
    except OSError:
        return False


def _die() -> None:
    os._exit(1)


def arm(parent_pid: int, interval: float = 0.25) -> bool:
    """Exit this process when ``parent_pid`` dies; returns whether the kernel signal was armed.

    Call it from the main thread. If the parent is already gone (it died
    before we got here) the process exits immediately.
    """
    signal.signal(PARENT_DEATH_SIGNAL, lambda _signum, _frame: _die())
    armed = _arm_prctl(PARENT_DEATH_SIGNAL)
    if os.getppid() != parent_pid:
        _die()

    def watchdog() -> None:
        stop = threading.Event()
        while not stop.wait(interval):
            if os.getppid() != parent_pid:
                _die()

    threading.Thread(target=watchdog, name="omni-parent-watchdog", daemon=True).start()
    return armed
