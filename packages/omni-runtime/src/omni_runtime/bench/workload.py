"""The workload: deterministic requests, driven at a fixed concurrency, each measured as the client sees it."""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .playback import Arrival, Playback, first_audible_index, play

_TEXT_POOL = (
    "The quick brown fox jumps over the lazy dog near the quiet river bank.",
    "Streaming speech lets a listener hear the first words while the rest is still being made.",
    "Every stage of the pipeline can share a process or run in its own, as the deployment declares.",
    "Measure the target workload before making a topology change persistent.",
    "A warm cup of tea on a cold morning makes the whole day feel a little brighter.",
    "The engineers compared two layouts and kept the one that answered faster under load.",
    "Numbers such as 42 and 3.5 are spelled out before the text reaches the synthesiser.",
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
)


def workload_text(length: int, index: int) -> str:
    """Deterministic English text of about ``length`` characters; varies with ``index``."""
    words: list[str] = []
    size = 0
    k = index
    while size < length:
        for word in _TEXT_POOL[k % len(_TEXT_POOL)].split():
            if size >= length:
                break
            words.append(word)
            size += len(word) + 1
        k += 1
    text = " ".join(words).rstrip(",.;")
    return text + "."


def request_data(length: int, index: int, stream: bool, voice: str | None = None) -> dict[str, Any]:
    """The ``index``-th request of a row: what ``omni serve`` hands the runtime for a speech request."""
    return {"text": workload_text(length, index), "voice": voice, "speed": 1.0, "response_format": "pcm", "stream": stream}


@dataclass(frozen=True)
class RequestSample:
    ok: bool
    latency_s: float
    first_audio_s: float | None
    audio_s: float
    error: str | None = None
    playback: Playback | None = None
    """What a listener playing the stream in real time from its first chunk experienced (streamed requests)."""
    queue_wait_s: float | None = None
    """Seconds the request waited in batching engines' queues before its first step (``RequestHandle.queue_waits``, summed); None: no stage reported one."""


def _audio_seconds(chunk: Any) -> float:
    if not isinstance(chunk, dict) or "audio" not in chunk or not chunk.get("sample_rate"):
        return 0.0
    audio = chunk["audio"]
    frames = audio.shape[-1] if hasattr(audio, "shape") and len(audio.shape) else 0
    return frames / float(chunk["sample_rate"])


def _arrival(chunk: dict[str, Any], at: float, seconds: float) -> Arrival:
    audio = chunk["audio"]
    samples = audio.numpy() if hasattr(audio, "numpy") else audio
    return Arrival(at, seconds, first_audible_index(samples), int(chunk["sample_rate"]))


async def one_request(runtime: Any, data: dict[str, Any], stream: bool, timeout: float) -> RequestSample:
    """Submit one request and time it as a client would: every audio chunk's arrival (played
    back in real time from the first, ``playback``) and completion."""
    began = time.perf_counter()
    first: float | None = None
    audio_s = 0.0
    arrivals: list[Arrival] = []
    handle = None
    try:
        handle = await runtime.submit(data)

        async def drain() -> dict[str, Any]:
            nonlocal first, audio_s
            async for chunk in handle.stream():
                seconds = _audio_seconds(chunk)
                if seconds > 0:
                    at = time.perf_counter() - began
                    first = at if first is None else first
                    arrivals.append(_arrival(chunk, at, seconds))
                audio_s += seconds
            return await handle.result()

        result = await asyncio.wait_for(drain(), timeout)
        if audio_s == 0.0:
            audio_s = _audio_seconds(result)
            first = time.perf_counter() - began if audio_s else None
    except Exception as exc:  # noqa: BLE001 - a failed request is a data point, not a crash of the benchmark
        if handle is not None and isinstance(exc, asyncio.TimeoutError):
            await handle.cancel()
        message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return RequestSample(ok=False, latency_s=time.perf_counter() - began, first_audio_s=None, audio_s=0.0, error=message)
    latency = time.perf_counter() - began
    # Without streaming, the client holds no audio until the response is complete.
    ttfa = first if stream else latency
    waits = getattr(handle, "queue_waits", None) or {}
    return RequestSample(
        ok=True, latency_s=latency, first_audio_s=ttfa, audio_s=audio_s, playback=play(arrivals) if stream and arrivals else None,
        queue_wait_s=sum(waits.values()) if waits else None,
    )


async def drive(runtime: Any, payloads: list[dict[str, Any]], concurrency: int, stream: bool, timeout: float) -> tuple[list[RequestSample], float]:
    """``concurrency`` clients, each sending its next request when the last one completes (closed loop)."""
    pending = iter(payloads)
    samples: list[RequestSample] = []

    async def client() -> None:
        for data in pending:
            samples.append(await one_request(runtime, data, stream, timeout))

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return samples, time.perf_counter() - began


def poisson_arrivals(rate: float, count: int, seed: int) -> list[float]:
    """Seconds from the start at which ``count`` requests arrive at ``rate`` per second on
    average (exponential gaps, a Poisson process); the same seed gives the same schedule."""
    rng = random.Random(seed)
    at, times = 0.0, []
    for _ in range(count):
        times.append(at)
        at += rng.expovariate(rate)
    return times


async def drive_open_loop(runtime: Any, payloads: list[dict[str, Any]], arrivals: Sequence[float], stream: bool, timeout: float) -> tuple[list[RequestSample], float]:
    """Send each request at its arrival time whatever is still in flight (open loop: a slow
    server faces a growing queue, as it would from independent users)."""
    began = time.perf_counter()

    async def at(offset: float, data: dict[str, Any]) -> RequestSample:
        delay = offset - (time.perf_counter() - began)
        if delay > 0:
            await asyncio.sleep(delay)
        return await one_request(runtime, data, stream, timeout)

    samples = await asyncio.gather(*(at(offset, data) for offset, data in zip(arrivals, payloads)))
    return list(samples), time.perf_counter() - began


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (``q`` in [0, 100]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class RssSampler:
    """Peak RSS of each worker process, sampled in the background while a row runs."""

    def __init__(self, pids: dict[str, int | None], interval: float = 0.2) -> None:
        import psutil

        self._procs = {}
        for name, pid in pids.items():
            if pid is None:
                continue
            try:
                self._procs[name] = psutil.Process(pid)
            except psutil.Error:
                continue
        self.peak: dict[str, int] = {name: 0 for name in self._procs}
        self._interval = interval
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        import psutil

        for name, proc in self._procs.items():
            try:
                self.peak[name] = max(self.peak[name], proc.memory_info().rss)
            except psutil.Error:
                continue

    async def _loop(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self._interval)

    def __enter__(self) -> RssSampler:  # noqa: PYI034 - Python 3.10 has no typing.Self
        self._task = asyncio.get_running_loop().create_task(self._loop())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
        self.sample()

    def mib(self) -> dict[str, float]:
        return {name: round(value / 2**20, 1) for name, value in self.peak.items()}
