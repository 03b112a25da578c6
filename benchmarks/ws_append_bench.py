"""True append against separate segments on ``/v1/audio/speech/stream``, for a Qwen3-TTS 12 Hz checkpoint.

One ``omni serve`` of the Qwen3-TTS 12 Hz pipeline (``--weights DIR``: a published
checkpoint; without it a tiny random checkpoint in the published layout, written by the
test helper, so the numbers are the server's and the runtime's, not a real model's). Both
contenders speak the same answer on the same socket, switched by the session's
``text_append``:

* **append**: the answer's words go to ONE running request as they arrive;
* **separate**: the answer is cut into clauses and sentences, one request each.

Each is timed from its first text delta to its first audio, with the text sent all at once
(3-character deltas back to back) and at a language model's pace (30 words per second); also
the requests it took. (The time to the last audio is not compared: on a random checkpoint the
two modes make audio of different lengths, so it would not be equal work.) Median and
90th percentile over ``--runs`` answers after 2 warm-up answers. Run:
``nox -s bench_ws_append`` (``-- --runs 5 --weights DIR --device cuda``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import websockets
from voice_stream_bench import ws_answer_times  # this folder is on sys.path when a benchmark runs

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "packages" / "omni-models" / "src" / "omni_models" / "qwen3_tts_12hz" / "pipeline.yaml"
ANSWER = ("Sure, the meeting is at three, in the small room on the second floor. "
          "Bring the slides from last week, and the numbers for the third quarter.")
SESSION = {"voice": "vivian", "response_format": "pcm", "seed": 19, "max_new_tokens": 300}
"""Seed 19: the tiny random checkpoint speaks the whole answer (its 140 tokens) in one request before it samples its end."""


def tiny_checkpoint(directory: Path) -> Path:
    sys.path.insert(0, str(ROOT / "packages" / "omni-models" / "tests"))
    from qwen3_tts_12hz_checkpoint import write_checkpoint

    return write_checkpoint(directory / "cv", "custom_voice")


def start(weights: Path, device: str, log: Path) -> tuple[subprocess.Popen[str], str]:
    """The server, its output in ``log`` (a pipe nobody reads would stop it once full)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "omni_runtime.cli", "serve", "--config", str(PIPELINE), "--weights", str(weights), "--port", "0",
         "--device", device, "--log-level", "warning"],
        stdout=log.open("w"), stderr=subprocess.STDOUT, text=True, start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 300
    while not (url := _serving_url(log)):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"omni serve did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    deadline = time.monotonic() + 300
    while httpx.get(f"{url}/health").status_code != 200:
        if time.monotonic() > deadline:
            raise SystemExit("the server never turned healthy")
        time.sleep(0.2)
    return proc, url


async def answer(ws: websockets.ClientConnection, words_per_s: float | None) -> tuple[float, float, int]:
    """(seconds to the first audio, seconds to response.done, requests) from the first delta."""
    return await ws_answer_times(ws, ANSWER, words_per_s)


def _serving_url(log: Path) -> str | None:
    for line in log.read_text().splitlines():
        if line.startswith("omni: serving ") and " on http://" in line:
            return line.split(" on ", 1)[1].split()[0]
    return None


def summary(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


async def measure(url: str, runs: int) -> dict[str, dict[str, tuple[float, float]]]:
    out = {}
    for mode, append in (("append", True), ("separate", False)):
        samples: dict[str, list[float]] = {"burst": [], "paced": [], "requests": []}
        async with websockets.connect(url.replace("http://", "ws://") + "/v1/audio/speech/stream", max_size=2**24) as ws:
            await ws.send(json.dumps({"type": "session.update", "session": {**SESSION, "text_append": append}}))
            updated = json.loads(await ws.recv())
            if updated.get("type") != "session.updated":
                raise SystemExit(f"session.update refused: {updated}")
            for index in range(runs + 2):
                burst, _, _ = await answer(ws, None)
                paced, _, requests = await answer(ws, 30.0)
                if index >= 2:
                    for key, value in (("burst", burst), ("paced", paced), ("requests", requests)):
                        samples[key].append(value)
        out[mode] = {key: summary(values) for key, values in samples.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, default=None, help="a Qwen3-TTS 12 Hz CustomVoice checkpoint (default: a tiny random one)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        weights = args.weights or tiny_checkpoint(Path(scratch))
        log = Path(scratch) / "serve.log"
        proc, url = start(weights, args.device, log)
        try:
            r = asyncio.run(measure(url, args.runs))
        except Exception:
            time.sleep(1)  # let the server log what it saw
            print(log.read_text()[-3000:], file=sys.stderr)
            raise
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    ms = lambda pair: f"{1000 * pair[0]:6.0f} / {1000 * pair[1]:4.0f}"  # noqa: E731
    what = "tiny random checkpoint" if args.weights is None else str(args.weights)
    print(f"\nms from the first delta (median / p90 over {args.runs} answers; {what}, device {args.device})\n")
    print("| mode | first audio, text at once | first audio, 30 words/s | requests per answer |")
    print("|---|---|---|---|")
    for mode, row in r.items():
        print(f"| {mode} | {ms(row['burst'])} | {ms(row['paced'])} | {row['requests'][0]:.0f} |")
    a, s = r["append"], r["separate"]
    print(f"| ratio append/separate | {a['burst'][0] / s['burst'][0]:.2f} | {a['paced'][0] / s['paced'][0]:.2f} | |")


if __name__ == "__main__":
    main()
