"""A real three-node Ray cluster on 127.0.0.1 (head, node_a, node_b) for the end-to-end Ray tests.

Collected only where Ray is installed (the ``ray`` nox session, which sets
``OMNI_REQUIRE_RAY=1`` so a missing Ray fails instead of skipping).
"""

from __future__ import annotations

import pytest

from omni_runtime.raycluster.local import tests_to_skip

collect_ignore_glob = tests_to_skip(["test_*.py"])


@pytest.fixture(scope="module")
def cluster():
    from omni_runtime.raycluster.local import local_cluster

    with local_cluster({"node_a": {"node_a": 4}, "node_b": {"node_b": 4}}, head_cpus=2) as local:
        yield local
