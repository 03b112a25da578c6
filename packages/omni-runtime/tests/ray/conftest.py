"""A real three-node Ray cluster on 127.0.0.1 for the Ray backend's tests.

A head node (where the test process is the driver and the runtime's parent)
and two worker nodes offering the custom resources ``node_a`` and ``node_b``,
each with its own raylet, object store and worker processes. Started once per
module (it takes seconds; a test process is connected to one cluster at a
time). The ``ray`` nox session installs Ray and sets ``OMNI_REQUIRE_RAY=1``,
so a missing Ray fails there instead of skipping; in sessions without Ray the
cluster tests are not collected (the placement and TCP tests need no Ray).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # ray_stages, for the driver and (through its sys.path) the actors

if importlib.util.find_spec("ray") is None:
    if os.environ.get("OMNI_REQUIRE_RAY") == "1":
        raise RuntimeError("OMNI_REQUIRE_RAY=1 but ray is not installed: pip install 'omni-runtime[ray]'")
    collect_ignore_glob = ["test_cluster*.py"]


@pytest.fixture(scope="module")
def cluster():
    from omni_runtime.raycluster.local import local_cluster

    with local_cluster({"node_a": {"node_a": 4}, "node_b": {"node_b": 4}}) as local:
        yield local
