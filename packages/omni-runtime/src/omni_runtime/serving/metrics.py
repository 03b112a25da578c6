"""Prometheus metrics for one app instance (each one is documented in the package README).

Each app owns its :class:`CollectorRegistry` (never the global one) so two
servers in one process, e.g. in tests, never double-register or mix counts.
Queue depth, process health and the workers' memory and CPU are read at scrape
time, so they are never stale. The server's own process metrics come from
prometheus_client's standard collectors; the workers' come from psutil, read
by the parent from each worker's pid (a worker serves no HTTP of its own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import psutil
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_PROCESS_STATES = ("starting", "ready", "restarting", "dead", "stopped")
NO_MODEL = ""
"""The ``model`` label of requests that never named a served model (a 404, a body that is not JSON)."""


class ServingMetrics:
    """Request, latency, per-stage, per-process and per-worker metrics."""

    def __init__(
        self,
        queue_depths: Callable[[], Mapping[str, int]],
        health: Callable[[], Mapping[str, Any]],
        worker_pids: Callable[[], Mapping[str, int | None]] = dict,
        build: Mapping[str, str] | None = None,
        supervision: Callable[[], Mapping[str, Any]] | None = None,
    ):
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        Info("omni_build", "Versions of omni and its runtime pieces serving this endpoint.", registry=registry).info(dict(build or {}))
        self.requests = Counter(
            "omni_requests", "HTTP requests by endpoint, model and status code (499: client went away).",
            ["endpoint", "model", "status"], registry=registry,
        )
        self.latency = Histogram(
            "omni_request_latency_seconds", "Wall time from request arrival to the last response byte.",
            ["endpoint", "model"], buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.first_audio = Histogram(
            "omni_time_to_first_audio_seconds", "Wall time from request arrival to the first audio byte of a streamed response.",
            ["model"], buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.stage_latency = Histogram(
            "omni_stage_latency_seconds", "Time each stage spent on a request (from the runtime's stage timings).",
            ["model", "stage"], buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.audio_seconds = Counter("omni_audio_seconds", "Seconds of audio sent to clients.", ["model"], registry=registry)
        self.input_characters = Counter(
            "omni_input_characters", "Characters of accepted speech input (before any stage runs).", ["model"], registry=registry,
        )
        self.in_flight = Gauge("omni_requests_in_flight", "Speech requests being processed.", registry=registry)
        registry.register(_RuntimeCollector(queue_depths, health))
        if supervision is not None:
            registry.register(_SupervisionCollector(supervision))
        registry.register(_WorkerCollector(worker_pids))
        self.transport: dict[str, dict[str, dict[str, int]]] = {}
        registry.register(_TransportCollector(lambda: self.transport))
        self.streams = AudioSLOMetrics(registry)

    async def refresh_transport(self, runtime: Any) -> None:
        """Read the bytes sent per process, peer and transport (a cluster run asks its actors; bounded to 2 s)."""
        import asyncio
        import contextlib

        getter = getattr(runtime, "transport_bytes", None)
        if getter is None:
            return
        with contextlib.suppress(Exception):
            self.transport = await asyncio.wait_for(getter(), 2.0)

    def observe_request(self, endpoint: str, status: int, seconds: float, model: str = NO_MODEL) -> None:
        self.requests.labels(endpoint=endpoint, model=model, status=str(status)).inc()
        self.latency.labels(endpoint=endpoint, model=model).observe(seconds)

    def count(self, endpoint: str, status: int, model: str = NO_MODEL) -> None:
        self.requests.labels(endpoint=endpoint, model=model, status=str(status)).inc()

    def observe_stages(self, timings: Mapping[str, float] | None, model: str) -> None:
        for stage, seconds in (timings or {}).items():
            if isinstance(seconds, (int, float)) and seconds >= 0:
                self.stage_latency.labels(model=model, stage=stage).observe(float(seconds))

    def observe_audio(self, model: str, seconds: float) -> None:
        if seconds > 0:
            self.audio_seconds.labels(model=model).inc(seconds)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


STREAM_LABELS = ("model", "stage", "replica")
CHUNK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0)
RTF_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.85, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0)


class AudioSLOMetrics:
    """What a listener of each streamed response hears, by model and by the terminal stage and
    replica that produced it (docs/audio-slo-metrics.md has the PromQL).

    The server keeps a playback clock per stream: the client starts playing at the first chunk,
    so a chunk is due when the audio sent before it has played out; a chunk that leaves the
    server after that instant is *late* (the client, with no buffer of its own, underruns).
    """

    def __init__(self, registry: CollectorRegistry):
        labels = list(STREAM_LABELS)
        self.first_audio = Histogram(
            "omni_stream_time_to_first_audio_seconds", "Request arrival to the first audio chunk leaving the server, streamed responses.",
            labels, buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.chunk_interval = Histogram(
            "omni_stream_chunk_interval_seconds", "Time between consecutive audio chunks of one streamed response.",
            labels, buckets=CHUNK_BUCKETS, registry=registry,
        )
        self.chunks = Counter("omni_stream_chunks", "Audio chunks sent in streamed responses.", labels, registry=registry)
        self.late_chunks = Counter(
            "omni_stream_late_chunks",
            "Chunks that left after their playback deadline (the audio sent before them had already played out): underrun risk.",
            labels, registry=registry,
        )
        self.late_seconds = Counter(
            "omni_stream_late_seconds", "Seconds by which late chunks missed their playback deadline (silence a real-time client hears).",
            labels, registry=registry,
        )
        self.rtf = Histogram(
            "omni_stream_rtf", "Real-time factor of each completed streamed response: arrival to last chunk, over its audio seconds.",
            labels, buckets=RTF_BUCKETS, registry=registry,
        )
        self.queue_wait = Histogram(
            "omni_stage_queue_wait_seconds",
            "Time a request waited in a stage's engine queue before its first prefill/decode step (batching stages report it).",
            labels, buckets=LATENCY_BUCKETS, registry=registry,
        )

    def observe_queue_waits(self, model: str, waits: Mapping[str, float] | None, topology: Any, instances: Iterable[str]) -> None:
        """One request's queue wait per stage (``RequestHandle.queue_waits``), labelled with the replica
        of the process instance that ran the stage for it."""
        bound = tuple(instances)
        for stage, seconds in (waits or {}).items():
            if isinstance(seconds, (int, float)) and seconds >= 0:
                self.queue_wait.labels(model, stage, stage_replica(topology, bound, stage)).observe(float(seconds))

    def track(self, model: str, stage: str, replica: str, started: float) -> StreamTracker:
        for counter in (self.chunks, self.late_chunks, self.late_seconds):
            counter.labels(model, stage, replica)  # present at 0, so rate() and ratios answer before the first late chunk
        return StreamTracker(self, (model, stage, replica), started)


class StreamTracker:
    """One streamed response's playback clock (``time.perf_counter`` seconds)."""

    def __init__(self, slo: AudioSLOMetrics, labels: tuple[str, str, str], started: float):
        self.slo, self.labels, self.started = slo, labels, started
        self.first: float | None = None
        self.last: float | None = None
        self.audio_s = 0.0

    def chunk(self, seconds: float, now: float | None = None) -> None:
        """A chunk of ``seconds`` audio leaves the server now."""
        import time

        now = time.perf_counter() if now is None else now
        labels = self.labels
        if self.first is None:
            self.first = now
            self.slo.first_audio.labels(*labels).observe(now - self.started)
        else:
            self.slo.chunk_interval.labels(*labels).observe(now - self.last)
            due = self.first + self.audio_s
            if now > due:
                self.slo.late_chunks.labels(*labels).inc()
                self.slo.late_seconds.labels(*labels).inc(now - due)
                self.first += now - due  # the client resumes from here: later chunks are due that much later
        self.slo.chunks.labels(*labels).inc()
        self.last = now
        self.audio_s += seconds

    def finish(self) -> None:
        if self.last is not None and self.audio_s > 0:
            self.slo.rtf.labels(*self.labels).observe((self.last - self.started) / self.audio_s)


def stream_origin(topology: Any, instances: Iterable[str]) -> tuple[str, str]:
    """``(terminal stage, replica)`` of the process instance among ``instances`` that runs the
    topology's terminal stage (replica ``"0"`` for a process that is not replicated)."""
    if topology is None:
        return "unknown", "0"
    terminal = {s.name for s in topology.stages if s.terminal}
    bound = set(instances)
    for inst in topology.instances:
        if inst.name in bound:
            for placement in inst.stages:
                if placement.stage in terminal:
                    return placement.stage, str(inst.replica or 0)
    return (sorted(terminal)[0] if terminal else "unknown"), "0"


def stage_replica(topology: Any, instances: Iterable[str], stage: str) -> str:
    """Replica index (``"0"`` when not replicated) of the instance among ``instances`` that runs ``stage``."""
    if topology is None:
        return "0"
    bound = set(instances)
    for inst in topology.instances:
        if inst.name in bound and any(p.stage == stage for p in inst.stages):
            return str(inst.replica or 0)
    return "0"


class _RuntimeCollector(Collector):
    """Scrape-time gauges read from the runtime."""

    def __init__(self, queue_depths: Callable[[], Mapping[str, int]], health: Callable[[], Mapping[str, Any]]):
        self._queue_depths = queue_depths
        self._health = health

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return list(self._families({}, {}))

    def collect(self) -> Iterable[GaugeMetricFamily]:
        return self._families(self._queue_depths(), self._health())

    @staticmethod
    def _families(depths: Mapping[str, int], health: Mapping[str, Any]) -> Iterable[GaugeMetricFamily]:
        depth = GaugeMetricFamily("omni_queue_depth", "Requests queued or running in each process instance.", labels=["process"])
        for process, value in sorted(depths.items()):
            depth.add_metric([process], float(value))
        yield depth
        states = GaugeMetricFamily("omni_process_state", "1 for the state each process instance is in.", labels=["process", "state"])
        for process, state in sorted((health.get("processes") or {}).items()):
            for candidate in sorted({*_PROCESS_STATES, str(state)}):
                states.add_metric([process, candidate], 1.0 if state == candidate else 0.0)
        yield states
        yield GaugeMetricFamily("omni_runtime_healthy", "1 when every process instance is ready.", value=1.0 if health.get("healthy") else 0.0)


class _WorkerCollector(Collector):
    """Resident memory and CPU time of every worker process, read through psutil by pid."""

    def __init__(self, worker_pids: Callable[[], Mapping[str, int | None]]):
        self._worker_pids = worker_pids
        self._handles: dict[int, psutil.Process] = {}

    def describe(self) -> Iterable[Any]:
        return list(self._families({}))

    def collect(self) -> Iterable[Any]:
        return self._families(self._worker_pids())

    def _families(self, pids: Mapping[str, int | None]) -> Iterable[Any]:
        rss = GaugeMetricFamily("omni_worker_resident_memory_bytes", "Resident memory of each worker process.", labels=["process", "pid"])
        cpu = CounterMetricFamily("omni_worker_cpu_seconds", "User and system CPU time of each worker process.", labels=["process", "pid"])
        live: dict[int, psutil.Process] = {}
        for name, pid in sorted(pids.items()):
            if not pid:
                continue
            try:
                proc = self._handles.get(pid) or psutil.Process(pid)
                with proc.oneshot():
                    memory, times = proc.memory_info(), proc.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            live[pid] = proc
            rss.add_metric([name, str(pid)], float(memory.rss))
            cpu.add_metric([name, str(pid)], float(times.user + times.system))
        self._handles = live
        yield rss
        yield cpu


class _TransportCollector(Collector):
    """Bytes each process sent to each peer, by transport (ipc, shm, tcp); filled with --backend ray."""

    def __init__(self, snapshot: Callable[[], Mapping[str, Mapping[str, Mapping[str, int]]]]):
        self._snapshot = snapshot

    def describe(self) -> Iterable[CounterMetricFamily]:
        return list(self._families({}))

    def collect(self) -> Iterable[CounterMetricFamily]:
        return self._families(self._snapshot())

    @staticmethod
    def _families(sent: Mapping[str, Mapping[str, Mapping[str, int]]]) -> Iterable[CounterMetricFamily]:
        family = CounterMetricFamily("omni_transport_bytes", "Bytes sent from process src to process dst over each transport.", labels=["src", "dst", "transport"])
        for src, peers in sorted(sent.items()):
            for dst, counts in sorted(peers.items()):
                for transport, value in sorted(counts.items()):
                    family.add_metric([src, dst, transport], float(value))
        yield family


class _SupervisionCollector(Collector):
    """Restarts by instance and reason, and the latest time to ready of each instance, read at scrape time."""

    def __init__(self, supervision: Callable[[], Mapping[str, Any]]):
        self._supervision = supervision

    def describe(self) -> Iterable[Any]:
        return [
            CounterMetricFamily("omni_process_restarts", "Restarts of each process instance, by the reason it died.", labels=["process", "reason"]),
            GaugeMetricFamily("omni_process_time_to_ready_seconds", "Seconds the latest start of each process instance took to be ready.", labels=["process"]),
            CounterMetricFamily("omni_control_send_failures", "Control messages (cancel, credit, shutdown, peer list) the parent could not send.", labels=["kind", "process"]),
        ]

    def collect(self) -> Iterable[Any]:
        stats = self._supervision()
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
        failed = CounterMetricFamily("omni_control_send_failures", "Control messages (cancel, credit, shutdown, peer list) the parent could not send.", labels=["kind", "process"])
        for (kind, process), count in sorted((stats.get("control_failures") or {}).items()):
            failed.add_metric([kind, process], float(count))
        yield failed
        by_worker = CounterMetricFamily(
            "omni_worker_control_send_failures",
            "Control messages (credit, heartbeat, ...) a worker could not send, by sending process, kind and peer (reported with its heartbeats).",
            labels=["process", "kind", "peer"],
        )
        for (process, kind, peer), count in sorted((stats.get("worker_control_failures") or {}).items()):
            by_worker.add_metric([process, kind, peer], float(count))
        yield by_worker
