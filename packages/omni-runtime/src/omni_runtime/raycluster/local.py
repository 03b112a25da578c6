"""A real multi-node Ray cluster on one machine, every process on 127.0.0.1.

For tests, benchmarks and trying the Ray backend without a cluster: a head
node plus one node per entry of ``nodes`` (each with its own raylet, object
store and worker processes, and the custom resources given), made with Ray's
own ``ray.cluster_utils.Cluster``. Node health is checked every 200 ms, so a
removed node is noticed within about a second, as a lost machine would be on a
real cluster with tight settings.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

LOOPBACK = "127.0.0.1"
_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
_FAST_HEALTH = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 200, "health_check_timeout_ms": 200, "health_check_failure_threshold": 3}


@dataclass
class LocalCluster:
    cluster: Any
    nodes: dict[str, Any]
    """Ray's node handles by the names given (``node_a``), for :meth:`remove`."""

    @property
    def address(self) -> str:
        return self.cluster.address

    def node_id(self, name: str) -> str:
        return self.nodes[name].node_id

    def remove(self, name: str) -> None:
        """Kill every process of the node at once, as a lost machine."""
        self.cluster.remove_node(self.nodes.pop(name), allow_graceful=False)

    def add(self, name: str, resources: dict[str, float], num_cpus: float = 1, object_store_bytes: int = 80 << 20) -> str:
        self.nodes[name] = self.cluster.add_node(num_cpus=num_cpus, resources=dict(resources), node_ip_address=LOOPBACK, object_store_memory=object_store_bytes)
        return self.nodes[name].node_id


@contextlib.contextmanager
def local_cluster(nodes: dict[str, dict[str, float]], head_cpus: float = 1, object_store_bytes: int = 80 << 20, connect: bool = True) -> Iterator[LocalCluster]:
    """Start a head node and ``nodes`` (name -> custom resources); connect this process as the driver."""
    for key, value in _ENV.items():
        os.environ.setdefault(key, value)
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": head_cpus,
            "node_ip_address": LOOPBACK,
            "object_store_memory": object_store_bytes,
            "include_dashboard": False,
            "_system_config": dict(_FAST_HEALTH),
        },
    )
    local = LocalCluster(cluster, {})
    try:
        for name, resources in nodes.items():
            local.add(name, resources, object_store_bytes=object_store_bytes)
        if connect:
            ray.init(address=cluster.address, namespace="omni", log_to_driver=False, logging_level="WARNING")
        yield local
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
