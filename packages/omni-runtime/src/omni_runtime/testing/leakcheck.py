"""Leak checks for tests: new ``/dev/shm`` entries and left-over children.

Every transport/runtime test must prove it leaves nothing behind. Usage
(this is what ``tests/transport/conftest.py`` does; copy it for other test
folders)::

    from omni_runtime.testing import LeakCheck

    @pytest.fixture(autouse=True)
    def no_leaks():
        check = LeakCheck.start()
        yield check
        check.assert_clean()   # waits a little for exiting children

``LeakCheck.start()`` snapshots the entries of ``/dev/shm`` and this
process's descendants (read from ``/proc``, so it sees children started by
any means, grandchildren included; an orphan re-parented to init is out of
reach, which is why runtime tests also check by pid). ``assert_clean`` polls until
``wait`` seconds pass, then fails listing every new segment and every live
descendant (pid, state and command line). The multiprocessing resource
tracker and forkserver helpers are ignored: they are per-interpreter
singletons, not leaks.

Other test sessions on the same machine create segments too. A segment
named the way :class:`~omni_runtime.transport.shm.ShmPool` names them
(``<prefix><pid>-<seq>``) whose creator pid is alive and is not this process
or one of its descendants is someone else's and is ignored; every other new
entry counts (a dead creator's segment is exactly the crash leak to catch).
``ignore_shm`` (a regex, default from ``OMNI_LEAKCHECK_IGNORE_SHM``)
excludes more names for local parallel runs; CI leaves it unset.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field

SHM_DIR = "/dev/shm"


def shm_entries(shm_dir: str = SHM_DIR) -> frozenset[str]:
    """Names currently in the shared-memory directory."""
    try:
        return frozenset(os.listdir(shm_dir))
    except FileNotFoundError:
        return frozenset()


def _proc_stat(pid: int) -> tuple[int, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode(errors="replace")
    except OSError:
        return None
    # "pid (comm) state ppid ..." where comm may contain spaces or parens.
    rest = raw[raw.rfind(")") + 2 :].split()
    return int(rest[1]), rest[0]


def descendants(pid: int | None = None) -> dict[int, str]:
    """Live descendants of ``pid`` (default: this process) -> state letter."""
    root = os.getpid() if pid is None else pid
    parent_of: dict[int, tuple[int, str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _proc_stat(int(name))
            if st is not None:
                parent_of[int(name)] = st
    found: dict[int, str] = {}
    frontier = {root}
    while frontier:
        nxt = set()
        for child, (ppid, state) in parent_of.items():
            if ppid in frontier and child not in found:
                found[child] = state
                nxt.add(child)
        frontier = nxt
    return found


_POOL_NAME = re.compile(r"^.+-(\d+)-\d+$")


def _foreign(name: str, ours: set[int]) -> bool:
    """A pool segment whose creator is alive and not in our process tree."""
    m = _POOL_NAME.match(name)
    if m is None:
        return False
    pid = int(m.group(1))
    return pid not in ours and os.path.exists(f"/proc/{pid}")


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return "?"


def _helper_pids() -> set[int]:
    """Per-interpreter multiprocessing helpers that outlive tests by design."""
    pids = set()
    try:
        from multiprocessing import resource_tracker

        pid = getattr(resource_tracker._resource_tracker, "_pid", None)
        if pid:
            pids.add(pid)
    except (ImportError, AttributeError):  # private API moved: nothing to ignore
        pids = set()
    try:
        from multiprocessing import forkserver

        pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
        if pid:
            pids.add(pid)
    except (ImportError, AttributeError):
        return pids
    return pids


@dataclass
class LeakCheck:
    """A before-snapshot; :meth:`leaks` / :meth:`assert_clean` compare to now."""

    shm_before: frozenset[str]
    children_before: frozenset[int]
    shm_dir: str = SHM_DIR
    ignore_shm: re.Pattern | None = None
    extra: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, shm_dir: str = SHM_DIR, ignore_shm: str | None = None) -> LeakCheck:
        pattern = ignore_shm if ignore_shm is not None else os.environ.get("OMNI_LEAKCHECK_IGNORE_SHM")
        return cls(
            shm_before=shm_entries(shm_dir),
            children_before=frozenset(descendants()),
            shm_dir=shm_dir,
            ignore_shm=re.compile(pattern) if pattern else None,
        )

    def leaks(self) -> tuple[list[str], dict[int, str]]:
        """``(new segment names, {pid: description})`` right now."""
        family = descendants()
        ours = set(family) | {os.getpid()}
        new_shm = sorted(
            n for n in shm_entries(self.shm_dir) - self.shm_before if not (self.ignore_shm and self.ignore_shm.search(n)) and not _foreign(n, ours)
        )
        helpers = _helper_pids()
        kids = {pid: f"state={state} cmd={_cmdline(pid)}" for pid, state in family.items() if pid not in self.children_before and pid not in helpers}
        return new_shm, kids

    def assert_clean(self, wait: float = 5.0) -> None:
        """Fail unless no new segment and no new child remain within ``wait`` s."""
        deadline = time.monotonic() + wait
        while True:
            new_shm, kids = self.leaks()
            if not new_shm and not kids:
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        lines = []
        if new_shm:
            lines.append(f"leaked /dev/shm segments: {new_shm}")
        for pid, desc in sorted(kids.items()):
            lines.append(f"leftover child process {pid}: {desc}")
        raise AssertionError("; ".join(lines))
