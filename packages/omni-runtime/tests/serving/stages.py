"""Tiny stages for the serving tests: a text "frontend" and a sine-wave "vocoder".

They are real stages run by the real runtime in spawned processes; the audio
they make is a pure function of (text, voice, speed) so tests can compute the
exact samples a client must receive. Test-only controls travel as extra
request fields, the way a client would send them through ``extra_body``:

- ``gate_dir``: after the first chunk the vocoder waits for ``<gate_dir>/open``
  (lets a test prove chunks reach it before the request finishes, without timing);
- ``marker_dir``: the vocoder writes ``<request_id>.waiting`` after its first chunk, then
  ``<request_id>.cancelled`` or ``.finished``;
- ``return_whole``: return the audio in the final payload instead of streaming it;
- env ``SERVING_TEST_PID_DIR``: each factory writes ``<stage>.pid`` there;
- text containing ``NOISY`` makes the frontend print to its stdout;
- text containing ``FAIL_FRONTEND`` / ``FAIL_VOCODER`` / ``FAIL_MIDSTREAM`` raises.
"""

from __future__ import annotations

import asyncio
import math
import os
from pathlib import Path

import torch

from omni_runtime.errors import InvalidRequest, StageConfigError
from omni_runtime.payload import StagePayload

SECONDS_PER_CHAR = 0.01
VOICES = ("alloy", "low", "high")
"""The presets omni serve lists at GET /v1/audio/voices."""
REQUEST_LIMITS = {"max_input_chars": 3000}
"""What the server refuses itself, before a request reaches the frontend (reported by the worker at ready)."""
FREQUENCIES = {None: 440.0, "alloy": 440.0, "low": 220.0, "high": 880.0}
AMPLITUDE = 0.5
GATE_TIMEOUT_S = 60.0


def plan(text: str, voice: str | None, speed: float, sample_rate: int) -> tuple[float, int]:
    """(frequency, number of samples) of the utterance for ``text``."""
    if voice not in FREQUENCIES:
        raise InvalidRequest(param="voice", message=f"unknown voice {voice!r}; this test model knows {sorted(VOICES)}")
    return FREQUENCIES[voice], round(len(text) * SECONDS_PER_CHAR * sample_rate / speed)


def tone(freq: float, start: int, stop: int, sample_rate: int) -> torch.Tensor:
    t = torch.arange(start, stop, dtype=torch.float64) / sample_rate
    return (AMPLITUDE * torch.sin(2 * math.pi * freq * t)).to(torch.float32)


class Frontend:
    def process(self, payload: StagePayload) -> StagePayload:
        data = payload.data
        if "FAIL_FRONTEND" in data["text"]:
            raise ValueError("the frontend refuses this text")
        if data.get("instructions") == "FAIL_ON_INSTRUCTIONS":
            raise RuntimeError("instructions reached the frontend")
        if len(data["text"]) > REQUEST_LIMITS["max_input_chars"]:  # what the server answers for us (its message differs)
            raise InvalidRequest(param="input", message="the frontend got a text over its declared limit")
        if "NOISY" in data["text"]:
            print("frontend: chatty model code printing to stdout", flush=True)
        data["plan_text_chars"] = len(data["text"])
        return payload


def build_frontend(stage_name: str) -> Frontend:
    _record_pid(stage_name)
    return Frontend()


class SineVocoder:
    def __init__(self, sample_rate: int, chunk_seconds: float):
        self.sample_rate = sample_rate
        self.chunk = max(1, int(sample_rate * chunk_seconds))

    async def process(self, payload: StagePayload, ctx) -> StagePayload:
        marker = Path(payload.data["marker_dir"]) / payload.request_id if payload.data.get("marker_dir") else None
        try:
            return await self._synthesize(payload, ctx, marker)
        except asyncio.CancelledError:  # the runtime cancels an async stage's task on abort
            _touch(marker, "cancelled")
            raise

    async def _synthesize(self, payload: StagePayload, ctx, marker: Path | None) -> StagePayload:
        data = payload.data
        text = data["text"]
        if "FAIL_VOCODER" in text:
            raise RuntimeError("vocoder exploded on purpose")
        freq, total = plan(text, data.get("voice"), float(data.get("speed", 1.0)), self.sample_rate)
        if data.get("return_whole"):
            return StagePayload(payload.request_id, {"audio": tone(freq, 0, total, self.sample_rate), "sample_rate": self.sample_rate})
        for index, start in enumerate(range(0, total, self.chunk)):
            if index == 1:
                if "FAIL_MIDSTREAM" in text:
                    raise RuntimeError("vocoder failed after the first chunk")
                _touch(marker, "waiting")
                if data.get("gate_dir") and not await self._wait_gate(Path(data["gate_dir"]), ctx):
                    _touch(marker, "cancelled")
                    return StagePayload(payload.request_id, {"sample_rate": self.sample_rate})
            if ctx.cancelled:
                _touch(marker, "cancelled")
                return StagePayload(payload.request_id, {"sample_rate": self.sample_rate})
            await ctx.aemit({"audio": tone(freq, start, min(start + self.chunk, total), self.sample_rate), "sample_rate": self.sample_rate})
        _touch(marker, "finished")
        return StagePayload(payload.request_id, {"sample_rate": self.sample_rate, "num_samples": total})

    async def _wait_gate(self, gate: Path, ctx) -> bool:
        """True when the test opened the gate, False when the request was cancelled meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GATE_TIMEOUT_S
        while not (gate / "open").exists():
            if ctx.cancelled:
                return False
            if loop.time() > deadline:
                raise TimeoutError(f"test gate {gate} was never opened")
            await asyncio.sleep(0.01)
        return True


def build_sine_vocoder(stage_name: str, sample_rate: int = 16000, chunk_seconds: float = 0.05) -> SineVocoder:
    _record_pid(stage_name)
    if chunk_seconds * sample_rate < 1:  # judged from two values together, when the stage builds
        raise StageConfigError("chunk_seconds", chunk_seconds, f"a chunk must hold at least one sample at {sample_rate} Hz",
                               f"set chunk_seconds to {1 / sample_rate:g} or more")
    return SineVocoder(sample_rate, chunk_seconds)


def build_broken(stage_name: str):
    raise RuntimeError(f"cannot load weights for {stage_name}: /nonexistent/checkpoint is missing")


def _record_pid(stage_name: str) -> None:
    """With SERVING_TEST_PID_DIR set, write ``<stage>.pid`` so a test can SIGKILL that exact process."""
    folder = os.environ.get("SERVING_TEST_PID_DIR")
    if folder:
        Path(folder, f"{stage_name}.pid").write_text(str(os.getpid()))


def _touch(marker: Path | None, what: str) -> None:
    if marker is not None:
        tmp = marker.with_suffix(f".{what}.tmp")
        tmp.write_text(what)
        os.replace(tmp, marker.with_suffix(f".{what}"))


def build_slow_loader(stage_name: str):
    """A factory that "loads weights" until ``<SERVING_TEST_PID_DIR>/release`` exists (never, unless a test creates it)."""
    _record_pid(stage_name)
    import time

    release = Path(os.environ.get("SERVING_TEST_PID_DIR", "/nonexistent")) / "release"
    while not release.exists():
        time.sleep(0.05)
    return Frontend()
