"""Make a worker die with its parent, so a killed server leaves no orphan.

Two mechanisms, because either alone has a gap: ``prctl(PR_SET_PDEATHSIG)``
has the kernel signal us the instant the parent dies (Linux only, and tied to
the parent *thread* that spawned us), and a watchdog thread notices a changed
``getppid()`` on any POSIX system. Both end in the same cleanup callback.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def _arm_prctl(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0
    except OSError:
        return False


def arm(parent_pid: int, on_parent_death: Callable[[], None], interval: float = 0.25) -> bool:
    """Arm both mechanisms; ``on_parent_death`` must end the process (it runs at most once).

    Returns whether the kernel signal was armed. If the parent is already gone
    (it died before we got here) the callback runs immediately.
    """
    fired = threading.Lock()

    def fire() -> None:
        if fired.acquire(blocking=False):
            on_parent_death()
            os._exit(1)

    def on_signal(signum: int, frame: object) -> None:
        fire()

    signal.signal(signal.SIGTERM, on_signal)
    armed = _arm_prctl(signal.SIGTERM)
    if os.getppid() != parent_pid:
        fire()

    def watchdog() -> None:
        stop = threading.Event()
        while not stop.wait(interval):
            if os.getppid() != parent_pid:
                fire()
                return

    threading.Thread(target=watchdog, name="omni-parent-watchdog", daemon=True).start()
    return armed
