"""Overload benchmark: at ``--factor`` x the sustainable rate, is a refused request answered at once, and
do admitted requests keep their latency?

What a user runs: ``omni serve`` with the espeak reference pipeline split over five worker processes
(the engine and vocoder replicated twice) and ``--max-inflight``. Three measurements in one run:

1. the client's own ceiling: the same open-loop client (``--clients`` processes, a fresh connection
   per request, raw sockets) against ``http_client.TrivialServer`` (answers at once), at the
   overload's rate and as fast as it can: what the client itself adds to every latency below;
2. baseline: ``--concurrency`` closed-loop requests (default: ``--max-inflight``, the most the
   server admits), no overload: the sustainable rate and the admitted latency at the bound. An
   admitted request under overload shares the server with ``--max-inflight`` others, so this is
   the latency it should keep (a baseline at a lower concurrency would show Little's law, not
   the overload);
3. overload: an open loop at ``--factor`` x that rate for ``--duration`` s from ``--clients``
   processes (each at most ``--outstanding / --clients`` requests open; one due while full is
   counted as not sent).

Both sides of a 429's time are printed: the client-observed latency and the server's own share
from ``/metrics`` (``omni_overload_refusal_seconds``: head off the socket -> 429 handed to it;
``omni_event_loop_lag_seconds``: how late the serving loop runs), with the CPU the server process
and its workers used and the load average. Percentiles from the server's histograms are bucket
upper bounds (``<=``).

Usage: ``python benchmarks/overload_bench.py [--factor 10] [--duration 10] [--clients 4]
[--server-arg=--worker-nice=0]`` (``nox -s bench_overload -- ...``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from chaos_bench import MODEL, SPLIT, TEXT, paced  # noqa: E402  (the same split topology and request as the chaos benchmark)

TIMEOUT_S = 60.0
REFUSAL_TOTAL = 'omni_overload_refusal_seconds{part="total"}'
REFUSAL_QUEUED = 'omni_overload_refusal_seconds{part="queued"}'


# ---- the client (runs in its own processes) ----

def _request_bytes(host: str) -> bytes:
    body = json.dumps({"model": MODEL, "input": TEXT, "voice": "alloy", "response_format": "pcm"}).encode()
    return (f"POST /v1/audio/speech HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body  # one request per connection: the client closes after the answer


async def _one(host: str, port: int, request: bytes) -> tuple[float, float, int]:
    began = time.monotonic()

    async def exchange() -> int:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length: *(\d+)", head)
            await (reader.readexactly(int(length.group(1))) if length else reader.read())
            return int(head.split(b" ", 2)[1])
        finally:
            writer.close()

    try:
        status = await asyncio.wait_for(exchange(), TIMEOUT_S)
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError):
        status = 0
    return began, time.monotonic(), status


async def _client(url: str, mode: str, rate: float, seconds: float, outstanding: int, start_at: float) -> dict:
    host, port = url.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)
    request = _request_bytes(host)
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    began = time.monotonic()
    results: list[tuple[float, float, int]] = []
    skipped = 0
    if mode == "closed":  # `outstanding` users, each sending its next request when the last one ends
        async def user() -> None:
            while time.monotonic() - began < seconds:
                results.append(await _one(host, int(port), request))

        await asyncio.gather(*(user() for _ in range(outstanding)))
    else:
        results, skipped = await paced(rate, seconds, outstanding, lambda: _one(host, int(port), request))
    return {"results": results, "skipped": skipped}


def drive(url: str, mode: str, rate: float, seconds: float, outstanding: int, clients: int) -> tuple[list[tuple[float, float, int]], int]:
    """``clients`` processes sharing the rate and the open requests; they start together (one monotonic clock)."""
    start_at = time.monotonic() + 1.5
    procs = [
        subprocess.Popen([sys.executable, __file__, "client", url, mode, repr(rate / clients), repr(seconds),
                          str(max(1, outstanding // clients)), repr(start_at)], stdout=subprocess.PIPE, text=True)
        for _ in range(clients)
    ]
    results, skipped = [], 0
    for proc in procs:
        out, _ = proc.communicate(timeout=seconds + TIMEOUT_S + 60)
        data = json.loads(out.strip().splitlines()[-1])
        results += [tuple(r) for r in data["results"]]
        skipped += data["skipped"]
    return results, skipped


# ---- the server and its metrics ----

def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "omni_runtime.cli", "serve", "--model-path", MODEL, "--device", "cpu", "--port", "0",
               "--max-inflight", str(args.max_inflight), "--log-level", "warning", *SPLIT, *args.server_arg]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    found: list[str] = []
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        for line in proc.stdout:
            lines.append(line)
            match = re.search(r"omni: serving .* on (http://\S+)", line)
            if match:
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(600) or not found:
        proc.kill()
        raise SystemExit("omni serve did not start:\n" + "".join(lines[-40:]))
    return proc, found[0]


def scrape(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        return response.read().decode()


def samples(text: str, name: str) -> dict[str, float]:
    """``name{labels} value`` lines: labels -> value."""
    out: dict[str, float] = {}
    for match in re.finditer(rf"^{re.escape(name)}(\{{[^}}]*\}})? ([0-9.e+-]+)$", text, re.M):
        out[match.group(1) or ""] = out.get(match.group(1) or "", 0.0) + float(match.group(2))
    return out


def bucket_quantile(before: str, after: str, name: str, q: float) -> str:
    """The q-quantile's bucket upper bound of histogram ``name`` over the run (after - before)."""
    base, _, selector = name.partition("{")
    selector = selector.rstrip("}")

    def buckets(text: str) -> dict[float, float]:
        return {float("inf") if le == "+Inf" else float(le): v for key, v in samples(text, f"{base}_bucket").items()
                if selector in key for le in re.findall(r'le="([^"]+)"', key)}

    b0, b1 = buckets(before), buckets(after)
    counts = sorted((le, b1[le] - b0.get(le, 0.0)) for le in b1)
    total = counts[-1][1] if counts else 0
    if total <= 0:
        return "-"
    for le, cumulative in counts:
        if cumulative >= q * total:
            return f"<= {le * 1000:g} ms" if le != float("inf") else "> top bucket"
    return "-"


def cpu(text: str) -> tuple[float, float]:
    """(server process CPU seconds, all workers' CPU seconds)."""
    return sum(samples(text, "process_cpu_seconds_total").values()), sum(samples(text, "omni_worker_cpu_seconds_total").values())


def tcp_counters() -> dict[str, int]:
    """Machine-wide TCP counters (Linux): a full listen queue drops a handshake, and the client's
    retransmission after 1 s shows as a one-second latency no server-side timer can see."""
    try:
        lines = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines() if line.startswith("TcpExt:")]
    except OSError:
        return {}
    values = dict(zip(lines[0][1:], (int(v) for v in lines[1][1:]))) if len(lines) >= 2 else {}
    return {k: values.get(k, 0) for k in ("ListenOverflows", "TCPSynRetrans")}


# ---- the run ----

def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(values: list[float], q: float) -> str:
    return "-" if not values else f"{pct(values, q) * 1000:.1f} ms"


def run(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(HERE))
    import http_client

    rows: list[tuple[str, str]] = []
    proc, url = start_server(args)
    try:
        # baseline: the sustainable rate and the admitted latency without overload
        drive(url, "closed", 0, 3.0, args.concurrency, 1)  # warm-up
        base, _ = drive(url, "closed", 0, args.baseline, args.concurrency, 1)
        base_ok = [e - s for s, e, st in base if st == 200]
        rate = len(base_ok) / args.baseline
        offered = rate * args.factor
        with http_client.TrivialServer() as trivial:
            floor, floor_skipped = drive(trivial.url, "open", offered, args.ceiling_seconds, args.outstanding, args.clients)
            flat_out, _ = drive(trivial.url, "closed", 0, args.ceiling_seconds, args.outstanding, args.clients)
        ceiling = sum(1 for *_, st in flat_out if st == 200) / args.ceiling_seconds
        floor_s = [e - s for s, e, st in floor if st == 200]
        floor_rate = len(floor_s) / max(1e-9, max(e for _, e, _ in floor) - min(s for s, _, _ in floor)) if floor else 0.0

        before = scrape(url)
        load_before = os.getloadavg()[0]
        tcp_before = tcp_counters()
        wall0 = time.monotonic()
        over, skipped = drive(url, "open", offered, args.duration, args.outstanding, args.clients)
        wall = time.monotonic() - wall0
        answered = len(over) / max(1e-9, max(e for _, e, _ in over) - min(s for s, _, _ in over)) if over else 0.0
        after = scrape(url)
        tcp_after = tcp_counters()
        load_after = os.getloadavg()[0]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)

    refused = [e - s for s, e, st in over if st == 429]
    admitted = [e - s for s, e, st in over if st == 200]
    other = sum(1 for *_, st in over if st not in (200, 429))
    (p0, w0), (p1, w1) = cpu(before), cpu(after)
    q = lambda name, quantile: bucket_quantile(before, after, name, quantile)  # noqa: E731
    rows += [
        ("server", f"omni serve {MODEL}, 5 workers, --max-inflight {args.max_inflight} {' '.join(args.server_arg)}".rstrip()),
        ("baseline (closed loop)", f"concurrency {args.concurrency}: {rate:.1f} req/s; admitted p50 {ms(base_ok, .5)}, p99 {ms(base_ok, .99)}"),
        ("client ceiling", f"{args.clients} processes, trivial server: {ceiling:.0f} req/s flat out; at the offered {offered:.0f} req/s "
                           f"{floor_rate:.0f} req/s answered, p50 {ms(floor_s, .5)}, p99 {ms(floor_s, .99)} ({floor_skipped} not sent)"),
        ("offered / ceiling", f"{offered:.0f} req/s = {offered / max(ceiling, 1e-9):.0%} of the client's ceiling"),
        (f"overload {args.factor:g}x, {args.duration:g} s", f"{len(over)} sent ({skipped} due while {args.outstanding} were open: not sent): "
                                                             f"{len(admitted)} ok, {len(refused)} got 429, {other} other; {answered:.0f} req/s answered"),
        ("429, client-observed", f"p50 {ms(refused, .5)}, p99 {ms(refused, .99)}"),
        ("429, server head -> 429", f"p50 {q(REFUSAL_TOTAL, .5)}, p99 {q(REFUSAL_TOTAL, .99)}"),
        ("  of it queued on the loop", f"p50 {q(REFUSAL_QUEUED, .5)}, p99 {q(REFUSAL_QUEUED, .99)}"),
        ("event-loop lag (50 ms timer)", f"p50 {q('omni_event_loop_lag_seconds', .5)}, p99 {q('omni_event_loop_lag_seconds', .99)}"),
        ("admitted: baseline -> overload", f"p50 {ms(base_ok, .5)} -> {ms(admitted, .5)} ({pct(admitted, .5) / pct(base_ok, .5):.2f}x), "
                                           f"p99 {ms(base_ok, .99)} -> {ms(admitted, .99)} ({pct(admitted, .99) / pct(base_ok, .99):.2f}x)"),
        ("CPU during overload", f"server process {(p1 - p0) / wall:.2f} cores, workers {(w1 - w0) / wall:.2f} cores "
                                f"(machine: {os.cpu_count()} cores)"),
        ("TCP during overload (machine)", ", ".join(f"{k} +{tcp_after[k] - tcp_before.get(k, 0)}" for k in tcp_after) or "-"),
        ("load average (1 min)", f"{load_before:.2f} before -> {load_after:.2f} after"),
    ]
    width = max(len(k) for k, _ in rows)
    print("\n".join(f"{k.ljust(width)}  {v}" for k, v in rows))
    return 0 if other == 0 else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["client"]:
        url, mode, rate, seconds, outstanding, start_at = argv[1:]
        print(json.dumps(asyncio.run(_client(url, mode, float(rate), float(seconds), int(outstanding), float(start_at)))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--factor", type=float, default=10.0, help="overload rate as a multiple of the baseline rate (default: %(default)s)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of overload (default: %(default)s)")
    parser.add_argument("--baseline", type=float, default=10.0, help="seconds of baseline load (default: %(default)s)")
    parser.add_argument("--concurrency", type=int, default=None, help="closed-loop baseline requests (default: --max-inflight)")
    parser.add_argument("--clients", type=int, default=4, help="client processes (default: %(default)s)")
    parser.add_argument("--outstanding", type=int, default=256, help="most overload requests open at once, all clients (default: %(default)s)")
    parser.add_argument("--max-inflight", type=int, default=16, help="the server's --max-inflight (default: %(default)s)")
    parser.add_argument("--ceiling-seconds", type=float, default=4.0, help="seconds for each client-ceiling run (default: %(default)s)")
    parser.add_argument("--server-arg", action="append", default=[], help="extra omni serve argument, repeatable (--server-arg=--flag=value)")
    args = parser.parse_args(argv)
    args.concurrency = args.concurrency or args.max_inflight
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
