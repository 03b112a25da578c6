"""The worker's one entry point: a plain function with one JSON argument, callable anywhere.

The local backend runs it in a fresh interpreter (``python -m
omni_runtime.worker``, the launch JSON on stdin); a cluster backend calls
:func:`run_worker` in a process of its own (an actor) with its
:class:`~.host.WorkerHost`. Either way the same code applies the launch's
options (``--log-level``/``--log-format`` included), builds and serves. No
pickled user object crosses: the topology, the instance name, the run
directory and the options are all in the
:class:`~omni_runtime.launch.WorkerLaunch` JSON.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading

from omni_compiler.topology import CompiledTopology

from .. import logs
from ..launch.spec import WorkerLaunch
from . import pdeath
from .core import TERM_EARLY, Worker
from .host import WorkerHost
from .options import WorkerOptions


def run_worker(launch_json: str, host: WorkerHost | None = None) -> int:
    """Host one process instance until the parent says stop; returns the exit status.

    ``host``: where it runs (default: a process of its own on this host).
    As its process's main program, on the main thread, it leaves SIGINT to
    the parent (Ctrl-C in a terminal reaches the whole process group; the
    parent stops everything cleanly) and, given ``parent_pid``, exits the
    moment that parent dies.
    """
    host = host or WorkerHost()
    launch = WorkerLaunch.from_json(launch_json)
    for entry in reversed(launch.sys_path):  # the parent's import path, where it exists on this host
        if entry not in sys.path and os.path.exists(entry):
            sys.path.insert(0, entry)
    options = WorkerOptions(**launch.options)
    # marked: a local worker's lines are passed through by its parent; elsewhere they are read as they are
    logs.configure(options.log_level, options.log_format, instance=launch.instance, marked=host.owns_process)
    if host.owns_process and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, lambda _signum, _frame: TERM_EARLY.set())
        if launch.parent_pid is not None:
            pdeath.arm(launch.parent_pid)
    topology = CompiledTopology.from_json(launch.topology)
    instance = next(i for i in topology.instances if i.name == launch.instance)
    topology, instance = host.place(topology, instance, options)
    for placement in instance.stages:
        os.environ.update(topology.stage(placement.stage).env)
    worker = Worker(topology, instance, launch.run, options, host)
    host.serving(worker)
    profile_dir = os.environ.get("OMNI_RUNTIME_PROFILE_DIR")
    profiler = None
    if profile_dir:  # operators: cProfile every worker, one .prof file per instance
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        asyncio.run(worker.run())
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(os.path.join(profile_dir, f"{launch.instance}.prof"))
        sys.stdout.flush()
        sys.stderr.flush()
    return 0
