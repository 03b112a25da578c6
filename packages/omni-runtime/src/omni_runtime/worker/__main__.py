"""``python -m omni_runtime.worker``: read the launch JSON from stdin and host that instance."""

import os
import sys

from .entry import run_worker

if __name__ == "__main__":
    code = run_worker(sys.stdin.read())
    sys.stdout.flush()
    sys.stderr.flush()
    # Threads of sync stages that ignore ctx.cancelled must not keep a stopped worker alive.
    os._exit(code)
