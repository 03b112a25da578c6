"""Prometheus metrics for one app instance.

Each app owns its :class:`CollectorRegistry` (never the global one) so two
servers in one process, e.g. in tests, never double-register or mix counts.
Queue depth and process health are read from the runtime at scrape time, so
they are never stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_PROCESS_STATES = ("starting", "ready", "dead", "stopped")


class ServingMetrics:
    """Request, latency, per-stage and per-process metrics."""

    def __init__(self, queue_depths: Callable[[], Mapping[str, int]], health: Callable[[], Mapping[str, Any]]):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "omni_requests",
            "HTTP requests by endpoint and status code (499: client went away).",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "omni_request_latency_seconds",
            "Wall time from request arrival to the last response byte.",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.first_audio = Histogram(
            "omni_time_to_first_audio_seconds",
            "Wall time from request arrival to the first audio byte of a streamed response.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.stage_latency = Histogram(
            "omni_stage_latency_seconds",
            "Time each stage spent on a request (from the runtime's stage timings).",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge("omni_requests_in_flight", "Speech requests being processed.", registry=self.registry)
        self.transport: dict[str, dict[str, dict[str, int]]] = {}
        self.registry.register(_RuntimeCollector(queue_depths, health))
        self.registry.register(_TransportCollector(lambda: self.transport))

    async def refresh_transport(self, runtime: Any) -> None:
        """Read the bytes sent per process, peer and transport (a cluster run asks its actors; bounded to 2 s)."""
        import asyncio
        import contextlib

        getter = getattr(runtime, "transport_bytes", None)
        if getter is None:
            return
        with contextlib.suppress(Exception):
            self.transport = await asyncio.wait_for(getter(), 2.0)

    def observe_request(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint=endpoint, status=str(status)).inc()
        self.latency.labels(endpoint=endpoint).observe(seconds)

    def observe_stages(self, timings: Mapping[str, float] | None) -> None:
        for stage, seconds in (timings or {}).items():
            if isinstance(seconds, (int, float)) and seconds >= 0:
                self.stage_latency.labels(stage=stage).observe(float(seconds))

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _RuntimeCollector(Collector):
    """Scrape-time gauges read from the runtime."""

    def __init__(self, queue_depths: Callable[[], Mapping[str, int]], health: Callable[[], Mapping[str, Any]]):
        self._queue_depths = queue_depths
        self._health = health

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return [
            GaugeMetricFamily("omni_queue_depth", "Requests queued or running in each process instance.", labels=["process"]),
            GaugeMetricFamily("omni_process_state", "1 for the state each process instance is in.", labels=["process", "state"]),
            GaugeMetricFamily("omni_runtime_healthy", "1 when every process instance is ready."),
        ]

    def collect(self) -> Iterable[GaugeMetricFamily]:
        depth = GaugeMetricFamily("omni_queue_depth", "Requests queued or running in each process instance.", labels=["process"])
        for process, value in sorted(self._queue_depths().items()):
            depth.add_metric([process], float(value))
        yield depth
        health = self._health()
        states = GaugeMetricFamily("omni_process_state", "1 for the state each process instance is in.", labels=["process", "state"])
        for process, state in sorted((health.get("processes") or {}).items()):
            for candidate in _PROCESS_STATES:
                states.add_metric([process, candidate], 1.0 if state == candidate else 0.0)
        yield states
        yield GaugeMetricFamily(
            "omni_runtime_healthy", "1 when every process instance is ready.", value=1.0 if health.get("healthy") else 0.0
        )


class _TransportCollector(Collector):
    """Bytes each process sent to each peer, by transport (ipc, shm, tcp); filled with --backend ray."""

    def __init__(self, snapshot: Callable[[], Mapping[str, Mapping[str, Mapping[str, int]]]]):
        self._snapshot = snapshot

    def describe(self) -> Iterable[CounterMetricFamily]:
        return [CounterMetricFamily("omni_transport_bytes", "Bytes sent from process src to process dst over each transport.", labels=["src", "dst", "transport"])]

    def collect(self) -> Iterable[CounterMetricFamily]:
        family = CounterMetricFamily("omni_transport_bytes", "Bytes sent from process src to process dst over each transport.", labels=["src", "dst", "transport"])
        for src, peers in sorted(self._snapshot().items()):
            for dst, counts in sorted(peers.items()):
                for transport, value in sorted(counts.items()):
                    family.add_metric([src, dst, transport], float(value))
        yield family
