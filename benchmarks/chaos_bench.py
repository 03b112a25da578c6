"""Chaos benchmark: ``omni serve`` under steady load while its workers are killed, then overloaded.

What a user runs (``omni serve``, the OpenAI HTTP endpoint) on a split, replicated
topology: the espeak reference pipeline with each stage in its own process and the
engine and vocoder processes replicated twice (5 worker processes). Three phases
against one server:

1. baseline: ``--concurrency`` closed-loop clients for ``--baseline`` seconds, no
   faults; its throughput is the sustainable rate;
2. chaos: the same load for ``--duration`` seconds while every ``--kill-every``
   seconds a random worker gets SIGKILL or SIGTERM (coin toss);
3. overload: an open-loop burst at ``--overload-factor`` x the sustainable rate for
   ``--overload-duration`` seconds against ``--max-inflight``.

Every request has a deadline (the server's ``--request-timeout``); a client gives up
``HANG_MARGIN_S`` later and counts the request as hung (must be 0). After the run the
server gets SIGTERM; every worker it ever had must be gone and no ``/dev/shm`` segment of
the run may be left. Prints one table, and the client's own ceiling: the same client
against a server that answers at once (``http_client.TrivialServer``), at the baseline's
concurrency and at the overload's open requests, so an overload that measures the client
instead of the server shows as such.

Usage: ``python benchmarks/chaos_bench.py [--duration 180] [--kill-every 5] [--concurrency 4]``
(``nox -s chaos -- --duration 60``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx
import psutil

MODEL = "omni/espeak"
SPLIT = [
    "--stages.preprocessing.process", "front",
    "--stages.tts_engine.process", "engine",
    "--stages.vocoder.process", "vocoder",
    "--processes.engine.num_replicas", "2",
    "--processes.vocoder.num_replicas", "2",
]
HANG_MARGIN_S = 10.0
CEILING_S = 3.0
"""Seconds the client drives the trivial server per concurrency, to print its own ceiling."""
TEXT = "The quick brown fox jumps over the lazy dog."
T = TypeVar("T")


@dataclass
class Outcome:
    started: float
    ended: float
    status: int | None  # None: the client gave up (hung) or the connection failed
    error: str = ""


@dataclass
class Kill:
    at: float
    instance: str
    how: str
    ready_at: float | None = None
    first_success_at: float | None = None


@dataclass
class Server:
    proc: subprocess.Popen[str]
    url: str = ""
    lines: list[str] = field(default_factory=list)
    rss_peak: int = 0


def start_server(args: argparse.Namespace) -> Server:
    command = [
        sys.executable, "-m", "omni_runtime.cli", "serve", "--model-path", MODEL, "--device", "cpu", "--port", "0",
        "--request-timeout", str(args.request_timeout), "--max-inflight", str(args.max_inflight), "--log-level", "warning",
        "--shutdown-grace", "10", *SPLIT,
    ]
    for process in ("front", "engine", "vocoder"):
        command += [f"--processes.{process}.restart.max_restarts", str(args.restart_budget), f"--processes.{process}.restart.backoff_s", "0.5"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    server = Server(proc)
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            server.lines.append(line)
            match = re.search(r"omni: serving .* on (http://\S+)", line)
            if match:
                server.url = match.group(1)
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(600) or not server.url:
        proc.kill()
        raise SystemExit("omni serve did not start:\n" + "".join(server.lines[-40:]))
    return server


async def wait_ready(client: httpx.AsyncClient, url: str) -> None:
    while True:
        try:
            if (await client.get(f"{url}/health")).json().get("status") == "ready":
                return
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.2)


async def one_request(client: httpx.AsyncClient, url: str, timeout: float) -> Outcome:
    """One speech request; ``timeout`` bounds its whole wall time (httpx's own timeouts are per phase)."""
    began = time.monotonic()
    try:
        post = client.post(f"{url}/v1/audio/speech", json={"model": MODEL, "input": TEXT, "voice": "alloy", "response_format": "pcm"}, timeout=timeout)
        response = await asyncio.wait_for(post, timeout)
        code = ""
        if response.status_code != 200:
            try:
                code = response.json()["error"]["code"] or ""
            except (ValueError, KeyError, TypeError):
                code = "not-json"
        return Outcome(began, time.monotonic(), response.status_code, code)
    except (httpx.TimeoutException, asyncio.TimeoutError):
        return Outcome(began, time.monotonic(), None, "hung")
    except httpx.HTTPError as exc:
        return Outcome(began, time.monotonic(), None, type(exc).__name__)


async def lean_request(url: str, timeout: float) -> Outcome:
    """One speech request over a fresh raw connection (what a lean client costs: no HTTP library on the client's loop)."""
    began = time.monotonic()
    host, port = url.removeprefix("http://").rsplit(":", 1)
    body = json.dumps({"model": MODEL, "input": TEXT, "voice": "alloy", "response_format": "pcm"}).encode()
    request = (f"POST /v1/audio/speech HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body

    async def exchange() -> Outcome:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = re.search(rb"(?i)content-length: *(\d+)", head)
            payload = await (reader.readexactly(int(length.group(1))) if length else reader.read())
            code = ""
            if status != 200:
                try:
                    code = json.loads(payload)["error"]["code"] or ""
                except (ValueError, KeyError, TypeError):
                    code = "not-json"
            return Outcome(began, time.monotonic(), status, code)
        finally:
            writer.close()

    try:
        return await asyncio.wait_for(exchange(), timeout)
    except asyncio.TimeoutError:
        return Outcome(began, time.monotonic(), None, "hung")
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
        return Outcome(began, time.monotonic(), None, type(exc).__name__)


async def closed_loop(client: httpx.AsyncClient, url: str, concurrency: int, seconds: float, timeout: float) -> list[Outcome]:
    stop = time.monotonic() + seconds
    out: list[Outcome] = []

    async def user() -> None:
        while time.monotonic() < stop:
            out.append(await one_request(client, url, timeout))

    await asyncio.gather(*(user() for _ in range(concurrency)))
    return out


async def open_loop(client: httpx.AsyncClient, url: str, rate: float, seconds: float, timeout: float, outstanding: int, lean: bool = True) -> tuple[list[Outcome], int]:
    """Requests at ``rate`` for ``seconds``; at most ``outstanding`` open at once (one client process cannot hold
    more without measuring itself instead of the server): a request due while the client is full is not sent (counted)."""
    return await paced(rate, seconds, outstanding, lambda: lean_request(url, timeout) if lean else one_request(client, url, timeout))


async def paced(rate: float, seconds: float, outstanding: int, send: Callable[[], Awaitable[T]]) -> tuple[list[T], int]:
    """``send()`` at ``rate`` per second for ``seconds`` (an open loop); one due while ``outstanding`` are open is skipped (counted)."""
    tasks = []
    began = time.monotonic()
    due_count = 0
    skipped = 0
    open_now = [0]

    async def tracked() -> T:
        open_now[0] += 1
        try:
            return await send()
        finally:
            open_now[0] -= 1

    while time.monotonic() - began < seconds:
        due = began + due_count / rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        due_count += 1
        if open_now[0] >= outstanding:
            skipped += 1
            continue
        tasks.append(asyncio.ensure_future(tracked()))
    return list(await asyncio.gather(*tasks)), skipped


async def killer(client: httpx.AsyncClient, server: Server, every: float, seconds: float, kills: list[Kill], seen_pids: set[int]) -> None:
    stop = time.monotonic() + seconds
    rng = random.Random(7)
    while time.monotonic() + every < stop:
        await asyncio.sleep(every)
        live = (await client.get(f"{server.url}/v1/topology")).json()["live"]["instances"]
        ready = [(name, info["pid"]) for name, info in live.items() if info["state"] == "ready" and info.get("pid")]
        if not ready:
            continue
        name, pid = rng.choice(ready)
        seen_pids.add(pid)
        how = rng.choice(("SIGKILL", "SIGTERM"))
        try:
            os.kill(pid, getattr(signal, how))
        except ProcessLookupError:
            continue
        kills.append(Kill(time.monotonic(), name, how))


async def watch(client: httpx.AsyncClient, server: Server, kills: list[Kill], seen_pids: set[int], stop: asyncio.Event) -> None:
    """Poll the parent's RSS, the instances' pids, and when each killed instance is ready again."""
    parent = psutil.Process(server.proc.pid)
    while not stop.is_set():
        try:
            server.rss_peak = max(server.rss_peak, parent.memory_info().rss)
            live = (await client.get(f"{server.url}/v1/topology")).json()["live"]["instances"]
        except (httpx.HTTPError, psutil.Error, ValueError):
            await asyncio.sleep(0.05)
            continue
        now = time.monotonic()
        for info in live.values():
            if info.get("pid"):
                seen_pids.add(info["pid"])
        for kill in kills:
            if kill.ready_at is None and live.get(kill.instance, {}).get("state") == "ready" and now - kill.at > 0.3:
                kill.ready_at = now
        await asyncio.sleep(0.05)


def shm_names() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(args: argparse.Namespace) -> int:
    shm_before = shm_names()
    server = start_server(args)
    timeout = args.request_timeout + HANG_MARGIN_S
    kills: list[Kill] = []
    seen_pids: set[int] = {c.pid for c in psutil.Process(server.proc.pid).children(recursive=True)}
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        ceiling = await client_ceiling(client, args, timeout)
        await wait_ready(client, server.url)
        stop = asyncio.Event()
        watcher = asyncio.ensure_future(watch(client, server, kills, seen_pids, stop))
        baseline = await closed_loop(client, server.url, args.concurrency, args.baseline, timeout)
        base_ok = [o for o in baseline if o.status == 200]
        rate = len(base_ok) / args.baseline if base_ok else 1.0
        rss_baseline = server.rss_peak
        chaos_task = asyncio.ensure_future(closed_loop(client, server.url, args.concurrency, args.duration, timeout))
        await killer(client, server, args.kill_every, args.duration, kills, seen_pids)
        chaos = await chaos_task
        await wait_ready(client, server.url)
        rss_chaos = server.rss_peak
        overload, skipped = await open_loop(client, server.url, rate * args.overload_factor, args.overload_duration, timeout, args.overload_clients,
                                             args.overload_client == "lean")
        stop.set()
        await watcher
    restarts_text = ""
    try:
        restarts_text = httpx.get(f"{server.url}/metrics", timeout=10).text
    except httpx.HTTPError:
        pass
    os.killpg(server.proc.pid, signal.SIGTERM)
    code = server.proc.wait(timeout=120)
    time.sleep(1.0)
    left_children = [pid for pid in seen_pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    run_prefixes = {m.group(0) for line in server.lines for m in [re.search(r"omni-[0-9a-f]{8}-", line)] if m}
    new_shm = {n for n in shm_names() - shm_before if n.startswith("omni-") and (not run_prefixes or any(n.startswith(p) for p in run_prefixes) or _ours(n, seen_pids | {server.proc.pid}))}

    for kill in kills:
        later = [o.ended for o in chaos if o.status == 200 and kill.ready_at is not None and o.ended >= kill.ready_at]
        kill.first_success_at = min(later) if later else None
    restarts = sum(float(v) for v in re.findall(r'^omni_process_restarts_total\{[^}]*\} ([0-9.e+]+)$', restarts_text, re.M))
    print(table(args, rate, baseline, chaos, overload, skipped, kills, restarts, server, rss_baseline, rss_chaos, left_children, new_shm, code))
    print(ceiling_line(ceiling, rate, args))
    hung = sum(1 for o in chaos + overload + baseline if o.error == "hung")
    return 0 if hung == 0 and not left_children and not new_shm and code == 0 else 1


async def client_ceiling(client: httpx.AsyncClient, args: argparse.Namespace, timeout: float) -> dict[int, float]:
    """This client's own requests/s against a server that answers at once (``http_client.TrivialServer``),
    at the baseline's concurrency and at the overload's open requests: the most it could measure."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import http_client

    out = {}
    with http_client.TrivialServer() as trivial:
        base = trivial.url.rsplit("/v1/audio/speech", 1)[0]
        for concurrency in (args.concurrency, args.overload_clients):
            done = await closed_loop(client, base, concurrency, CEILING_S, timeout)
            out[concurrency] = sum(1 for o in done if o.status == 200) / CEILING_S
    return out


def ceiling_line(ceiling: dict[int, float], rate: float, args: argparse.Namespace) -> str:
    overload = rate * args.overload_factor
    top = ceiling[args.overload_clients]
    verdict = "client-bound: the overload measures the client" if overload > 0.5 * top else "the client is not the bottleneck"
    return (
        f"client ceiling (same client, trivial server, {CEILING_S:g} s each): {ceiling[args.concurrency]:.0f} req/s at concurrency {args.concurrency}, "
        f"{top:.0f} req/s at {args.overload_clients} open; baseline {rate:.2f} req/s, overload {overload:.1f} req/s = {overload / max(top, 1e-9):.1%} of it ({verdict})"
    )


def _ours(name: str, pids: set[int]) -> bool:
    parts = name.split("-")
    return len(parts) >= 4 and parts[-2].isdigit() and int(parts[-2]) in pids


def table(args, rate, baseline, chaos, overload, skipped, kills, restarts, server, rss_baseline, rss_chaos, left_children, new_shm, code) -> str:
    ok = [o for o in chaos if o.status == 200]
    failed = [o for o in chaos if o.status not in (200, None)]
    hung = [o for o in chaos if o.error == "hung"]
    other = [o for o in chaos if o.status is None and o.error != "hung"]
    fail_s = [o.ended - o.started for o in failed]
    to_ready = [k.ready_at - k.at for k in kills if k.ready_at is not None]
    to_success = [k.first_success_at - k.at for k in kills if k.first_success_at is not None]
    codes: dict[str, int] = {}
    for o in failed:
        codes[f"{o.status} {o.error}"] = codes.get(f"{o.status} {o.error}", 0) + 1
    o_ok = sum(1 for o in overload if o.status == 200)
    o_429 = sum(1 for o in overload if o.status == 429)
    o_hung = sum(1 for o in overload if o.error == "hung")
    o_other = len(overload) - o_ok - o_429 - o_hung
    o_429_s = [o.ended - o.started for o in overload if o.status == 429]
    o_ok_s = [o.ended - o.started for o in overload if o.status == 200]
    base_ok_s = [o.ended - o.started for o in baseline if o.status == 200]
    mib = 1 << 20
    rows = [
        ("topology", "espeak split: front, engine x2, vocoder x2 (5 workers), --device cpu"),
        ("baseline (no faults)", f"{len(baseline)} requests in {args.baseline:g} s, {rate:.2f} req/s sustainable at concurrency {args.concurrency}"),
        ("chaos duration", f"{args.duration:g} s, a random worker killed every {args.kill_every:g} s ({len(kills)} kills: "
         f"{sum(k.how == 'SIGKILL' for k in kills)} SIGKILL, {sum(k.how == 'SIGTERM' for k in kills)} SIGTERM)"),
        ("requests sent", str(len(chaos))),
        ("succeeded", f"{len(ok)} ({len(ok) / max(len(chaos), 1):.1%}), {len(ok) / max(args.duration, 1e-9):.2f} req/s = {len(ok) / max(args.duration, 1e-9) / rate:.2f}x baseline"),
        ("failed fast", f"{len(failed)} (longest time to fail {max(fail_s) if fail_s else 0:.2f} s; {', '.join(f'{k}: {v}' for k, v in sorted(codes.items())) or '-'})"),
        ("hung (must be 0)", f"{len(hung)}" + (f" (+{len(other)} connection errors)" if other else "")),
        ("restarts (/metrics)", f"{restarts:g}"),
        ("kill -> instance ready again", f"p50 {pct(to_ready, 0.5):.2f} s, max {max(to_ready) if to_ready else float('nan'):.2f} s ({len(to_ready)}/{len(kills)})"),
        ("kill -> first success after restart", f"p50 {pct(to_success, 0.5):.2f} s, max {max(to_success) if to_success else float('nan'):.2f} s"),
        ("parent peak RSS", f"{rss_baseline / mib:.0f} MiB baseline, {rss_chaos / mib:.0f} MiB after chaos"),
        (f"overload {args.overload_factor:g}x, {args.overload_client} client ({rate * args.overload_factor:.1f} req/s, {args.overload_duration:g} s, --max-inflight {args.max_inflight})",
         f"{len(overload)} sent ({skipped} more due while {args.overload_clients} were open: not sent): {o_ok} ok, {o_429} got 429 "
         f"(p50 {pct(o_429_s, 0.5) * 1000:.0f} ms, p99 {pct(o_429_s, 0.99) * 1000:.0f} ms, max {max(o_429_s, default=0) * 1000:.0f} ms), {o_other} other, {o_hung} hung"),
        ("admitted latency: baseline -> overload",
         f"p50 {pct(base_ok_s, 0.5) * 1000:.0f} -> {pct(o_ok_s, 0.5) * 1000:.0f} ms, p99 {pct(base_ok_s, 0.99) * 1000:.0f} -> {pct(o_ok_s, 0.99) * 1000:.0f} ms "
         f"({pct(o_ok_s, 0.99) / max(pct(base_ok_s, 0.99), 1e-9):.2f}x)"),
        ("parent peak RSS after overload", f"{server.rss_peak / mib:.0f} MiB ({server.rss_peak / max(rss_chaos, 1):.2f}x after chaos)"),
        ("after SIGTERM: exit code", str(code)),
        ("child processes left (must be 0)", str(len(left_children))),
        ("/dev/shm segments left (must be 0)", str(len(new_shm))),
    ]
    width = max(len(r[0]) for r in rows)
    lines = ["omni chaos benchmark", "-" * (width + 60)]
    lines += [f"{name.ljust(width)}  {value}" for name, value in rows]
    if kills:
        lines.append(f"{'kills'.ljust(width)}  " + ", ".join(f"{k.instance}:{k.how[3:]}" for k in kills[:12]) + (" ..." if len(kills) > 12 else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of load while workers are killed (default: %(default)s)")
    parser.add_argument("--kill-every", type=float, default=5.0, help="seconds between kills (default: %(default)s)")
    parser.add_argument("--concurrency", type=int, default=4, help="closed-loop clients (default: %(default)s)")
    parser.add_argument("--baseline", type=float, default=15.0, help="seconds of load without faults first (default: %(default)s)")
    parser.add_argument("--request-timeout", type=float, default=30.0, help="the server's --request-timeout (default: %(default)s)")
    parser.add_argument("--max-inflight", type=int, default=16, help="the server's --max-inflight (default: %(default)s)")
    parser.add_argument("--restart-budget", type=int, default=20, help="processes.<P>.restart.max_restarts for every process (default: %(default)s)")
    parser.add_argument("--overload-factor", type=float, default=10.0, help="overload rate as a multiple of the baseline rate (default: %(default)s)")
    parser.add_argument("--overload-duration", type=float, default=15.0, help="seconds of overload (default: %(default)s)")
    parser.add_argument("--overload-clients", type=int, default=256, help="most overload requests open at once from this client (default: %(default)s)")
    parser.add_argument("--overload-client", choices=["lean", "httpx"], default="lean",
                        help="overload requests over raw sockets (lean: measures the server, not the client's HTTP library) or httpx (default: %(default)s)")
    args = parser.parse_args(argv)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
