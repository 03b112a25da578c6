"""What runtime_bench.py and ray_bench.py share: the 4-stage no-op pipeline, the
closed-loop load, the HTTP client, the Ray baselines and the table.

Equal work for every contender: each of the four stages appends one
``time.monotonic_ns()`` stamp to the payload's ``t`` list and passes the payload
on; the last one adds a 10 ms, 24 kHz silent clip (``audio``), so an HTTP
request returns the same 480 bytes of PCM from omni and from Ray Serve. Every
contender gets the same warm-up (``WARMUP`` requests at each concurrency).

Ray baselines, each in its fastest idiomatic form:

* **Ray Serve**: four deployments and an ingress that chains their
  ``DeploymentResponse`` objects (``s2.remote(s1.remote(x))``), so intermediate
  results go replica to replica and are never materialised in the ingress;
  called through its handle (``serve.run``) and through Serve's HTTP proxy.
* **Ray core**: four actors chained by ``ObjectRef`` (``a2.run.remote(a1.run.remote(x))``)
  from the driver.

Every Ray process stays on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STAGES = ("s1", "s2", "s3", "s4")
HOPS = ("submit->s1", "s1->s2", "s2->s3", "s3->s4", "s4->result")
WARMUP = int(os.environ.get("OMNI_BENCH_WARMUP", "300"))
"""Requests every contender gets before each measured point (sockets, code paths, allocators, Ray's workers)."""
CLIP_SAMPLES = 240
SAMPLE_RATE = 24000
LOOPBACK_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
for _key, _value in LOOPBACK_ENV.items():  # before anything imports ray: Ray reads them at import
    os.environ.setdefault(_key, _value)


# -- the no-op stage (imported by omni's workers as bench_common:build_noop) ------------------


class NoOpStage:
    """Appends one timestamp and passes the payload on; the terminal one adds the silent clip."""

    def __init__(self, terminal: bool = False) -> None:
        self.terminal = terminal
        self.clip = None
        if terminal:
            import torch

            self.clip = torch.zeros(CLIP_SAMPLES)

    async def process(self, payload: Any) -> Any:
        payload.data.setdefault("t", []).append(time.monotonic_ns())  # an HTTP request starts without stamps
        if self.terminal:
            payload.data["audio"] = self.clip
            payload.data["sample_rate"] = SAMPLE_RATE
        return payload


def build_noop(terminal: bool = False) -> NoOpStage:
    return NoOpStage(terminal)


def pipeline_dict(processes: tuple[str, ...], ray: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The 4-stage pipeline as plain config data; ``processes[i]`` is stage i's process."""
    stages = []
    for index, name in enumerate(STAGES):
        stage: dict[str, Any] = {"name": name, "factory": "bench_common:build_noop", "process": processes[index]}
        if index + 1 < len(STAGES):
            stage["next"] = STAGES[index + 1]
        else:
            stage["terminal"] = True
            stage["factory_args"] = {"terminal": True}
        stages.append(stage)
    data: dict[str, Any] = {"name": "noop4", "stages": stages, "process_local_edges": []}
    if ray:
        data["processes"] = {name: {"ray": placement} for name, placement in ray.items()}
    return data


SPLIT = STAGES
GROUPED = ("pipeline",) * 4


def entry_payload() -> dict[str, Any]:
    return {"text": "x", "t": [time.monotonic_ns()]}


# -- measurement ------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


@dataclass(frozen=True)
class Load:
    """Closed-loop load result: ``concurrency`` clients each sending back-to-back requests."""

    concurrency: int
    requests: int
    seconds: float
    latencies: tuple[float, ...]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def p50_ms(self) -> float:
        return pct(list(self.latencies), 0.5) * 1e3

    def to_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "requests": self.requests, "seconds": self.seconds, "latencies": list(self.latencies)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Load:
        return cls(d["concurrency"], d["requests"], d["seconds"], tuple(d["latencies"]))


async def closed_loop(call: Callable[[], Awaitable[Any]], concurrency: int, total: int) -> Load:
    latencies: list[float] = []
    remaining = total

    async def client() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            began = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return Load(concurrency, total, time.perf_counter() - began, tuple(latencies))


async def warm_and_load(call: Callable[[], Awaitable[Any]], concurrencies: tuple[int, ...], requests: int) -> dict[int, Load]:
    """The same warm-up before every measured point, for every contender."""
    loads = {}
    for c in concurrencies:
        await closed_loop(call, c, WARMUP)
        loads[c] = await closed_loop(call, c, requests)
    return loads


def hops_of(stamps: list[int], hops: dict[str, list[float]]) -> None:
    if len(stamps) != len(HOPS) + 1:
        raise RuntimeError(f"a request passed {len(stamps) - 2} stages instead of {len(STAGES)}: stamps {stamps}")
    for name, a, b in zip(HOPS, stamps, stamps[1:]):
        hops[name].append((b - a) / 1e3)


async def measure_hops(call: Callable[[], Awaitable[dict[str, Any]]], requests: int) -> dict[str, list[float]]:
    """Sequential requests; each returns its stamps (with the caller's receive stamp appended)."""
    for _ in range(WARMUP):
        await call()
    hops: dict[str, list[float]] = {name: [] for name in HOPS}
    for _ in range(requests):
        hops_of((await call())["t"], hops)
    return hops


# -- HTTP (a client process of its own, the same for every server) ---------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


HTTP_BODY = {"model": "noop4", "input": "x", "voice": "default", "response_format": "pcm"}
sys.path.insert(0, str(HERE))  # http_client, imported by name from the benchmarks folder


def http_load(url: str, concurrencies: tuple[int, ...], requests: int) -> dict[int, Load]:
    """The closed loop over HTTP from ``http_client`` (keep-alive, several client processes), the
    same warm-up as every contender; ``client_ceiling`` says how far this client itself can go."""
    import http_client

    loads = {}
    for c in concurrencies:
        total, seconds, latencies = http_client.load(url, c, requests, WARMUP)
        loads[c] = Load(c, total, seconds, tuple(latencies))
    return loads


def client_ceiling(concurrencies: tuple[int, ...], requests: int) -> dict[int, Load]:
    """The HTTP client's own rate against a server that costs nothing (same requests, same bytes)."""
    import http_client

    with http_client.TrivialServer() as server:
        return http_load(server.url, concurrencies, requests)


def ceiling_rows(label: str, measured: dict[int, Load], ceiling: dict[int, Load]) -> list[list[str]]:
    """The client's ceiling next to a server's HTTP rate: a rate above half the ceiling measures the client."""
    import http_client

    rows = []
    for c in sorted(measured):
        share = measured[c].rps / ceiling[c].rps
        verdict = "client-bound" if share > http_client.CLIENT_BOUND else "server-bound"
        rows.append([label, f"c={c} req/s", f"{measured[c].rps:,.0f}", f"client ceiling {ceiling[c].rps:,.0f}", f"{share:.2f}x", f"<= {http_client.CLIENT_BOUND:g}x", verdict])
    return rows


def wait_http(url: str, timeout: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.post(url, json=HTTP_BODY, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout:g} s")


# -- Ray ---------------------------------------------------------------------------------------


def ray_missing() -> str | None:
    """None when Ray (with Serve) can be imported, else the reason it cannot."""
    try:
        import ray  # noqa: F401
        from ray import serve  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install
        return f"{type(exc).__name__}: {exc}"
    return None


def ray_init(address: str | None = None) -> None:
    """Connect to ``address``, or start a quiet one-node Ray on 127.0.0.1."""
    import logging

    import ray

    os.environ.update(LOOPBACK_ENV)
    for name in ("ray", "ray.serve"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if address:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    else:
        ray.init(
            num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
            _node_ip_address="127.0.0.1", object_store_memory=200 << 20,
        )


async def _ray_stage_call(data: dict[str, Any], terminal: bool) -> dict[str, Any]:
    data["t"].append(time.monotonic_ns())
    if terminal:
        data["audio"] = [0.0] * CLIP_SAMPLES
        data["sample_rate"] = SAMPLE_RATE
    return data


def _pcm_bytes(data: dict[str, Any]) -> bytes:
    import numpy as np

    return (np.asarray(data["audio"], dtype=np.float32) * 32767).astype("<i2").tobytes()


def measure_ray_serve(
    concurrencies: tuple[int, ...], requests: int, hop_requests: int, http: bool = True
) -> tuple[dict[str, list[float]], dict[int, Load], dict[int, Load]]:
    """Ray Serve: hops and load through the handle, then (``http``) load through its HTTP proxy."""
    from ray import serve
    from starlette.requests import Request
    from starlette.responses import Response

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})

    @serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1024)
    class Stage:
        def __init__(self, terminal: bool = False) -> None:
            self.terminal = terminal

        async def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
            return await _ray_stage_call(data, self.terminal)

    @serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1024)
    class Ingress:
        """Chains the stages' DeploymentResponses: nothing is materialised here until the end."""

        def __init__(self, s1: Any, s2: Any, s3: Any, s4: Any) -> None:
            self.stages = (s1, s2, s3, s4)

        async def run(self, data: dict[str, Any]) -> dict[str, Any]:
            response = data
            for stage in self.stages:
                response = stage.remote(response)
            return await response

        async def __call__(self, request: Request) -> Response:
            body = await request.json()
            result = await self.run({"text": body["input"], "t": [time.monotonic_ns()]})
            return Response(_pcm_bytes(result), media_type="audio/pcm")

    stages = [Stage.options(name=name).bind(name == STAGES[-1]) for name in STAGES]
    handle = serve.run(Ingress.bind(*stages), name="noop4", route_prefix="/v1/audio/speech", logging_config={"log_level": "ERROR"})
    run = handle.options(method_name="run")
    try:

        async def one() -> dict[str, Any]:
            result = await run.remote(entry_payload())
            result["t"].append(time.monotonic_ns())
            return result

        async def measure() -> tuple[dict[str, list[float]], dict[int, Load]]:
            return await measure_hops(one, hop_requests), await warm_and_load(one, concurrencies, requests)

        hops, loads = asyncio.run(measure())
        if not http:
            return hops, loads, {}
        url = f"http://127.0.0.1:{port}/v1/audio/speech"
        wait_http(url)
        return hops, loads, http_load(url, concurrencies, requests)
    finally:
        serve.shutdown()


def measure_ray_core(concurrencies: tuple[int, ...], requests: int, hop_requests: int) -> tuple[dict[str, list[float]], dict[int, Load]]:
    """Four Ray actors chained by ObjectRef from the driver."""
    import ray

    @ray.remote(num_cpus=0, max_concurrency=1024)
    class StageActor:
        def __init__(self, terminal: bool) -> None:
            self.terminal = terminal

        async def run(self, data: dict[str, Any]) -> dict[str, Any]:
            return await _ray_stage_call(data, self.terminal)

    actors = [StageActor.remote(name == STAGES[-1]) for name in STAGES]
    try:

        async def one() -> dict[str, Any]:
            ref: Any = entry_payload()
            for actor in actors:
                ref = actor.run.remote(ref)
            result = await ref
            result["t"].append(time.monotonic_ns())
            return result

        async def measure() -> tuple[dict[str, list[float]], dict[int, Load]]:
            return await measure_hops(one, hop_requests), await warm_and_load(one, concurrencies, requests)

        return asyncio.run(measure())
    finally:
        for actor in actors:
            ray.kill(actor)


# -- table ------------------------------------------------------------------------------------


def us(value: float) -> str:
    return f"{value:,.0f} us" if value >= 100 else f"{value:.1f} us"


def render(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) if i < len(r) else 0 for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def load_rows(label: str, ours: dict[int, Load], other: dict[int, Load], other_name: str, target: float | None, higher: bool = True) -> list[list[str]]:
    """``ours`` vs ``other`` per concurrency; ``target`` is the least acceptable req/s ratio (``higher``) or the most (not)."""
    rows = []
    for c in sorted(ours):
        o, r = ours[c], other[c]
        ratio = o.rps / r.rps
        if target is None:
            verdict, goal = "", ""
        elif higher:
            verdict, goal = ("PASS" if ratio >= target else "MISS"), f">= {target:g}x"
        else:
            verdict, goal = ("PASS" if ratio >= 1 / target else "MISS"), f"within {target:g}x"
        rows.append([label, f"c={c} req/s", f"{o.rps:,.0f}", f"{other_name} {r.rps:,.0f}", f"{ratio:.2f}x", goal, verdict])
        rows.append([label, f"c={c} p50", f"{o.p50_ms:.2f} ms", f"{other_name} {r.p50_ms:.2f} ms", f"{o.p50_ms / r.p50_ms:.2f}x", "lower is better", ""])
    return rows


