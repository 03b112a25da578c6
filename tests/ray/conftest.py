"""A real three-node Ray cluster on 127.0.0.1 (head, node_a, node_b) for the end-to-end Ray tests.

Collected only where Ray is installed (the ``ray`` nox session, which sets
``OMNI_REQUIRE_RAY=1`` so a missing Ray fails instead of skipping).
"""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("ray") is None:
    if os.environ.get("OMNI_REQUIRE_RAY") == "1":
        raise RuntimeError("OMNI_REQUIRE_RAY=1 but ray is not installed: pip install 'omni-runtime[ray]'")
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="module")
def cluster():
    from omni_runtime.raycluster.local import local_cluster

    with local_cluster({"node_a": {"node_a": 4}, "node_b": {"node_b": 4}}, head_cpus=2) as local:
        yield local
