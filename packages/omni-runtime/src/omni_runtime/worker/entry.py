"""The entry point of a spawned worker process: a plain function with JSON arguments.

The parent spawns this with the JSON topology and the instance name only (no
pickled user objects). It arms the parent-death signal, sets the stages' env,
then runs the :class:`Worker` until it is told to stop.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from omni_compiler.topology import CompiledTopology

from .. import pdeath
from .core import Worker
from .options import WorkerOptions


def main(topology_json: str, instance_name: str, run_json: str, parent_pid: int, options_json: str) -> None:
    """Entry point of a spawned worker process (the ``multiprocessing`` target)."""
    run = json.loads(run_json)
    pdeath.arm(parent_pid, lambda: _on_parent_death(run))
    topology = CompiledTopology.from_json(topology_json)
    options = WorkerOptions.from_json(options_json)
    instance = next(i for i in topology.instances if i.name == instance_name)
    for placement in instance.stages:
        os.environ.update(topology.stage(placement.stage).env)
    worker = Worker(topology, instance, run, options)
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
            profiler.dump_stats(os.path.join(profile_dir, f"{instance_name}.prof"))
        sys.stdout.flush()
        sys.stderr.flush()
    # Threads of sync stages that ignore ctx.cancelled must not keep a stopped worker alive.
    os._exit(0)


def _on_parent_death(run: dict[str, str]) -> None:
    """The parent is gone (even SIGKILL): remove the run's sockets and shared memory ourselves.

    Plain ``os``/``shutil`` only: this can run from a signal handler while the
    transport package is still half imported.
    """
    import shutil

    shutil.rmtree(run["path"], ignore_errors=True)
    prefix = run["shm_prefix"]
    if prefix.endswith("-") and len(prefix) > 5:
        try:
            names = os.listdir("/dev/shm")
        except OSError:
            names = []
        for name in names:
            if name.startswith(prefix):
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass
