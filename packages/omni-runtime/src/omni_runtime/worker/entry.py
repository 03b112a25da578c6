"""The worker's entry point: a plain function with one JSON argument, callable anywhere.

The local backend runs it in a fresh interpreter (``python -m
omni_runtime.worker``, the launch JSON on stdin); another backend may call
:func:`run_worker` in a process of its own (a Ray actor). No pickled user
object crosses: the topology, the instance name, the run directory and the
options are all in the :class:`~omni_runtime.launch.WorkerLaunch` JSON.
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
from .options import WorkerOptions


def run_worker(launch_json: str) -> int:
    """Host one process instance until the parent says stop; returns the exit status.

    On the main thread it leaves SIGINT to the parent (Ctrl-C in a terminal
    reaches the whole process group; the parent stops everything cleanly)
    and, given ``parent_pid``, exits the moment that parent dies.
    """
    launch = WorkerLaunch.from_json(launch_json)
    for entry in reversed(launch.sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    options = WorkerOptions(**launch.options)
    logs.configure(options.log_level, options.log_format, instance=launch.instance, marked=True)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, lambda _signum, _frame: TERM_EARLY.set())
        if launch.parent_pid is not None:
            pdeath.arm(launch.parent_pid)
    topology = CompiledTopology.from_json(launch.topology)
    instance = next(i for i in topology.instances if i.name == launch.instance)
    for placement in instance.stages:
        os.environ.update(topology.stage(placement.stage).env)
    worker = Worker(topology, instance, launch.run, options)
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
