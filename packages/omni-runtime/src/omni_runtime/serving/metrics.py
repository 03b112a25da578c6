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
_PROCESS_STATES = ("starting", "ready", "restarting", "dead", "stopped")


class ServingMetrics:
    """Request, latency, per-stage and per-process metrics."""

    def __init__(
        self,
        queue_depths: Callable[[], Mapping[str, int]],
        health: Callable[[], Mapping[str, Any]],
        supervision: Callable[[], Mapping[str, Any]] | None = None,
    ):
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
        self.registry.register(_RuntimeCollector(queue_depths, health, supervision))

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

    def __init__(
        self,
        queue_depths: Callable[[], Mapping[str, int]],
        health: Callable[[], Mapping[str, Any]],
        supervision: Callable[[], Mapping[str, Any]] | None,
    ):
        self._queue_depths = queue_depths
        self._health = health
        self._supervision = supervision

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return [
            GaugeMetricFamily("omni_queue_depth", "Requests queued or running in each process instance.", labels=["process"]),
            GaugeMetricFamily("omni_process_state", "1 for the state each process instance is in.", labels=["process", "state"]),
            GaugeMetricFamily("omni_runtime_healthy", "1 when every process instance is ready."),
            CounterMetricFamily("omni_process_restarts", "Restarts of each process instance, by the reason it died.", labels=["process", "reason"]),
            GaugeMetricFamily("omni_process_time_to_ready_seconds", "Seconds the latest start of each process instance took to be ready.", labels=["process"]),
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
        stats = self._supervision() if self._supervision is not None else {}
        restarts = CounterMetricFamily("omni_process_restarts", "Restarts of each process instance, by the reason it died.", labels=["process", "reason"])
        for (process, reason), count in sorted((stats.get("restarts") or {}).items()):
            restarts.add_metric([process, reason], float(count))
        yield restarts
        ready = GaugeMetricFamily("omni_process_time_to_ready_seconds", "Seconds the latest start of each process instance took to be ready.", labels=["process"])
        latest: dict[str, float] = {}
        for process, seconds in stats.get("ready_seconds") or ():
            latest[process] = seconds
        for process, seconds in sorted(latest.items()):
            ready.add_metric([process], float(seconds))
        yield ready
