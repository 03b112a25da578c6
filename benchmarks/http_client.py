"""A load client that is not the bottleneck: keep-alive HTTP/1.1 over raw asyncio streams
(``h11`` for the protocol), spread over several client processes, and its own ceiling measured
against a trivial server in the same run.

Why: one process running ``httpx.AsyncClient`` tops out at a few hundred requests per second on
a small machine, so a server measured through it at concurrency 64 looked slower than at
concurrency 1 (82 requests/s) while a lean client measured the same server at about 1,000.
Every HTTP row of ``runtime_bench.py`` and ``ray_bench.py`` now comes from ``load()``, and the
table prints the client's ceiling (``ceiling()``: the same requests against ``TrivialServer``,
which answers with the same 480 bytes at once) next to it, with a warning when a server's rate
comes within half of that ceiling (then the row measures the client, not the server).

    python benchmarks/http_client.py run URL CONNECTIONS REQUESTS WARMUP START_AT   (one client process)
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
#: Client processes for a load (each runs its share of the connections); at most one per connection.
PROCESSES = max(2, min(8, os.cpu_count() or 2))
#: A server rate above this share of the client's ceiling is reported as client-bound.
CLIENT_BOUND = 0.5
BODY = json.dumps({"model": "noop4", "input": "x", "voice": "default", "response_format": "pcm"}).encode()
CLIP_BYTES = 480


class _StaleConnection(Exception):
    """The server closed an idle keep-alive connection before answering anything on it."""


class _Connection:
    """One keep-alive connection that sends the same POST over and over."""

    def __init__(self, url: str, body: bytes):
        import h11

        self.h11 = h11
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
        self.body = body
        self.headers = [("Host", f"{self.host}:{self.port}"), ("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.conn: Any = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.conn = self.h11.Connection(self.h11.CLIENT)

    async def post(self) -> int:
        """One request; returns the body length (raises on a status other than 200). A keep-alive
        connection the server closed while it sat idle (its keep-alive timeout) is reopened and
        the request sent again, as browsers and HTTP libraries do."""
        try:
            return await self._post()
        except _StaleConnection:
            self.writer.close()
            await self.open()
            return await self._post()

    async def _post(self) -> int:
        h11, conn = self.h11, self.conn
        if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
            self.writer.close()
            await self.open()
            conn = self.conn
        self.writer.write(conn.send(h11.Request(method="POST", target=self.path, headers=self.headers)) + conn.send(h11.Data(data=self.body)) + conn.send(h11.EndOfMessage()))
        status, size = 0, 0
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                try:
                    data = await self.reader.read(65536)
                except ConnectionResetError:
                    if status == 0 and size == 0:
                        raise _StaleConnection from None
                    raise
                if not data:
                    if status == 0 and size == 0:
                        raise _StaleConnection
                    raise ConnectionError(f"{self.host}:{self.port} closed the connection mid-response")
                conn.receive_data(data)
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                size += len(event.data)
            elif isinstance(event, h11.EndOfMessage):
                break
        conn.start_next_cycle()
        if status != 200:
            raise RuntimeError(f"{self.path}: HTTP {status}")
        return size


async def _client_process(url: str, connections: int, requests: int, warmup: int, start_at: float) -> dict[str, Any]:
    pool = [_Connection(url, BODY) for _ in range(connections)]
    await asyncio.gather(*(c.open() for c in pool))

    async def loop(conn: _Connection, count: int, latencies: list[float] | None) -> None:
        for _ in range(count):
            began = time.perf_counter()
            size = await conn.post()
            if size != CLIP_BYTES:
                raise RuntimeError(f"{url}: {size} bytes instead of {CLIP_BYTES}")
            if latencies is not None:
                latencies.append(time.perf_counter() - began)

    def shares(total: int) -> list[int]:
        return [total // connections + (1 if i < total % connections else 0) for i in range(connections)]

    await asyncio.gather(*(loop(c, n, None) for c, n in zip(pool, shares(warmup))))
    delay = start_at - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    latencies: list[float] = []
    began = time.monotonic()
    await asyncio.gather(*(loop(c, n, latencies) for c, n in zip(pool, shares(requests))))
    ended = time.monotonic()
    for c in pool:
        c.writer.close()
    return {"began": began, "ended": ended, "latencies": latencies}


def load(url: str, concurrency: int, requests: int, warmup: int, processes: int = PROCESSES) -> tuple[int, float, list[float]]:
    """``concurrency`` keep-alive connections spread over client processes, each sending
    back-to-back requests; returns (requests, seconds, latencies). CLOCK_MONOTONIC is one clock for
    every process on Linux, so the processes start together and the wall time spans them all."""
    procs = max(1, min(processes, concurrency))
    conns = [concurrency // procs + (1 if i < concurrency % procs else 0) for i in range(procs)]
    reqs = [requests * c // concurrency for c in conns]
    reqs[0] += requests - sum(reqs)
    warm = [max(c, warmup * c // concurrency) for c in conns]
    start_at = time.monotonic() + 3.0 + 0.02 * sum(warm)  # connect and warm up first
    children = [
        subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "run", url, str(c), str(r), str(w), repr(start_at)], stdout=subprocess.PIPE, text=True)
        for c, r, w in zip(conns, reqs, warm)
    ]
    results = []
    for child in children:
        out, _ = child.communicate(timeout=1800)
        if child.returncode != 0:
            raise RuntimeError(f"HTTP client process failed (exit {child.returncode}) against {url}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    began = min(r["began"] for r in results)
    ended = max(r["ended"] for r in results)
    return requests, ended - began, [x for r in results for x in r["latencies"]]


class TrivialServer:
    """Answers every POST at once with the benchmark's 480 bytes (keep-alive), in its own process:
    what the client can drive when the server costs nothing."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> TrivialServer:
        self.process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "serve"], stdout=subprocess.PIPE, text=True)
        port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{port}/v1/audio/speech"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)


async def _serve() -> None:
    import h11

    response_body = bytes(CLIP_BYTES)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await reader.read(65536)
                    if not data:
                        return
                    conn.receive_data(data)
                elif isinstance(event, h11.EndOfMessage):
                    headers = [("Content-Type", "audio/pcm"), ("Content-Length", str(CLIP_BYTES))]
                    writer.write(conn.send(h11.Response(status_code=200, headers=headers)) + conn.send(h11.Data(data=response_body)) + conn.send(h11.EndOfMessage()))
                    conn.start_next_cycle()
                elif isinstance(event, h11.ConnectionClosed):
                    return
        except (ConnectionError, h11.RemoteProtocolError):
            return
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        asyncio.run(_serve())
    elif sys.argv[1:2] == ["run"] and len(sys.argv) == 7:
        _url, _conns, _reqs, _warm, _start = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
        print(json.dumps(asyncio.run(_client_process(_url, _conns, _reqs, _warm, _start))))
    else:
        sys.exit(__doc__)
