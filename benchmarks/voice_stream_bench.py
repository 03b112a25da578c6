"""Time to first audio on ``/v1/audio/speech/stream`` against streamed ``POST /v1/audio/speech``, per model.

For each pipeline (espeak and Qwen3-TTS by default) one ``omni serve`` runs; every
contender speaks the same answer and is timed from its first byte of text to its
first byte of audio:

* **HTTP stream**: ``POST /v1/audio/speech`` with ``stream: true`` and the answer's first
  segment as ``input`` (the same text the stream synthesises first: equal work);
* **WS, all at once**: the whole answer in 3-character deltas sent back to back;
* **WS, paced**: the answer word by word at 30 words per second (a language model's pace):
  the first audio waits for the first clause or sentence to be complete;
* **barge-in**: from ``response.cancel`` of a long answer to the first audio of the next one.

Each point is the median and the 90th percentile over ``--runs`` answers after 2 warm-up
answers. Run: ``nox -s bench_voice`` (``-- --models omni/espeak --runs 5 --device cpu``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import websockets

ROOT = Path(__file__).resolve().parents[1]
ANSWER = ("Sure, the meeting is at three, in the small room on the second floor. "
          "Bring the slides from last week, and the numbers for the third quarter.")
FIRST_SEGMENT = "Sure, the meeting is at three,"
"""What the stream's segmenter hands out first for ANSWER: the HTTP contender synthesises exactly this (equal work)."""
LONG = " ".join(f"This is sentence {n} of a long answer that the user interrupts." for n in range(20))


def start(model: str, device: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "omni_runtime.cli", "serve", "--model", model, "--port", "0", "--device", device, "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("omni: serving ") and " on http://" in line:
            url = line.split(" on ", 1)[1].split()[0]
            break
    else:
        raise SystemExit(f"omni serve --model {model} did not start")
    deadline = time.monotonic() + 300
    while httpx.get(f"{url}/health").status_code != 200:
        if time.monotonic() > deadline:
            raise SystemExit(f"{model} never turned healthy")
        time.sleep(0.2)
    return proc, url


async def http_first_audio(url: str, model: str) -> float:
    async with httpx.AsyncClient(timeout=120) as client:
        started = time.perf_counter()
        async with client.stream("POST", f"{url}/v1/audio/speech", json={"model": model, "input": FIRST_SEGMENT, "response_format": "pcm",
                                                                          "stream": True}) as response:
            first = None
            async for chunk in response.aiter_bytes():
                if chunk and first is None:
                    first = time.perf_counter() - started
    if first is None:
        raise RuntimeError("no audio")
    return first


async def ws_answer(ws: websockets.ClientConnection, text: str, words_per_s: float | None) -> float:
    """Seconds from the first delta to the first audio.delta; reads the answer to its end."""
    return (await ws_answer_times(ws, text, words_per_s))[0]


async def ws_answer_times(ws: websockets.ClientConnection, text: str, words_per_s: float | None) -> tuple[float, float, int]:
    """(seconds to the first audio.delta, seconds to response.done, the response's segments) from the first delta.

    ``words_per_s``: the deltas are words at that pace (a language model speaking); None: 3-character pieces at once.
    """
    pieces = [w + " " for w in text.split(" ")] if words_per_s else [text[i:i + 3] for i in range(0, len(text), 3)]
    started = time.perf_counter()

    async def produce() -> None:
        for piece in pieces:
            await ws.send(json.dumps({"type": "input_text.delta", "delta": piece}))
            if words_per_s:
                await asyncio.sleep(1 / words_per_s)
        await ws.send(json.dumps({"type": "input_text.done"}))

    producer = asyncio.create_task(produce())
    first = done = None
    segments = 0
    async for raw in ws:
        message = json.loads(raw)
        if message["type"] == "audio.delta" and first is None:
            first = time.perf_counter() - started
        if message["type"] == "error":
            raise RuntimeError(message["error"]["message"])
        if message["type"] == "response.done":
            done, segments = time.perf_counter() - started, int(message.get("segments", 0))
            break
    await producer
    if first is None or done is None:
        raise RuntimeError("the answer ended without audio")
    return first, done, segments


async def barge_in(ws: websockets.ClientConnection) -> float:
    """Seconds from response.cancel of a long answer to the first audio of the next answer."""
    await ws.send(json.dumps({"type": "input_text.delta", "delta": LONG}))
    await ws.send(json.dumps({"type": "input_text.done"}))
    async for raw in ws:
        if json.loads(raw)["type"] == "audio.delta":
            break
    cancelled = time.perf_counter()
    await ws.send(json.dumps({"type": "response.cancel"}))
    await ws.send(json.dumps({"type": "input_text.delta", "delta": "Yes?"}))
    await ws.send(json.dumps({"type": "input_text.done"}))
    current = None
    async for raw in ws:
        message = json.loads(raw)
        if message["type"] == "response.created":
            current = message["response_id"]
        if message["type"] == "audio.delta" and message["response_id"] == current:
            first = time.perf_counter() - cancelled
            break
    async for raw in ws:
        message = json.loads(raw)
        if message["type"] == "response.done" and message["response_id"] == current:
            return first
    raise RuntimeError("the socket closed")


def summary(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


async def measure(model: str, device: str, runs: int) -> dict[str, tuple[float, float]]:
    proc, url = start(model, device)
    try:
        results: dict[str, list[float]] = {"http": [], "ws": [], "paced": [], "barge": []}
        async with websockets.connect(url.replace("http://", "ws://") + "/v1/audio/speech/stream", max_size=2**24) as ws:
            await ws.send(json.dumps({"type": "session.update", "session": {"model": model, "response_format": "pcm", "seed": 1}}))
            await ws.recv()
            for index in range(runs + 2):
                timings = {"http": await http_first_audio(url, model), "ws": await ws_answer(ws, ANSWER, None),
                           "paced": await ws_answer(ws, ANSWER, 30.0), "barge": await barge_in(ws)}
                if index >= 2:
                    for key, value in timings.items():
                        results[key].append(value)
        return {key: summary(values) for key, values in results.items()}
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["omni/espeak", "qwen/qwen3-tts"])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    rows = [(model, asyncio.run(measure(model, args.device, args.runs))) for model in args.models]
    ms = lambda pair: f"{1000 * pair[0]:7.0f} / {1000 * pair[1]:4.0f}"  # noqa: E731
    print(f"\ntime to first audio, ms (median / p90 over {args.runs} answers, device {args.device})\n")
    print("| model | HTTP stream, first segment | WS, text all at once | ratio WS/HTTP | WS, 30 words/s | barge-in -> next audio |")
    print("|---|---|---|---|---|---|")
    for model, r in rows:
        print(f"| {model} | {ms(r['http'])} | {ms(r['ws'])} | {r['ws'][0] / r['http'][0]:.2f} | {ms(r['paced'])} | {ms(r['barge'])} |")


if __name__ == "__main__":
    main()
