"""Streaming under load (issue 22): the deadline scheduler against ``scheduler: fifo``, same run.

For each model, ``omni bench`` (the user's path: ``Runtime.submit``, streamed PCM, a client that
plays every stream in real time from its first chunk) measures both schedulers in one
invocation each (``--alt fifo=...`` sets the engine's and the vocoder's ``scheduler``):

1. closed loop at concurrency 1 and 8: TTFA p50 and underruns;
2. ``--max-rate``: the highest open-loop (Poisson) rate with zero underruns and p95 TTFA within
   ``--ttfa-bound-ms``, per scheduler, each rate held ``--window`` seconds (a burst of a few
   requests is not a rate);
3. open loop at half the deadline scheduler's max rate: p95 TTFA against concurrency-1 TTFA.

Goals, printed per model with the ratios: max rate (deadline) >= 1.5x fifo's; p95 TTFA at half
that rate <= 2x the concurrency-1 TTFA p50; TTFA p50 at concurrency 8 <= 2x concurrency 1.
Every row runs ``--repeat`` times; the JSON rows carry the spread. A model without an AR engine
(espeak) has no scheduler knob: it is measured once, as the baseline of the machine.

    python benchmarks/stream_bench.py [--models qwen/qwen3-tts,bosonai/higgs-tts-3-4b,omni/espeak]
        [--requests 8] [--repeat 3] [--text-length 60] [--ttfa-bound-ms 1500] [--json FILE]
        [--weights MODEL=DIR] [--voice MODEL=NAME]   # e.g. the real Qwen3-TTS 12 Hz pipeline

Each run records the load average while it ran (the machine may be shared); the latest numbers
and what they mean are in docs/streaming-under-load.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

MODELS = ("qwen/qwen3-tts", "bosonai/higgs-tts-3-4b", "omni/espeak")
FIFO = "--stages.tts_engine.factory_args.scheduler fifo --stages.vocoder.factory_args.scheduler fifo"
#: Models with the ``scheduler`` knob, and the overrides that select ``fifo`` (engine and vocoder).
SCHEDULED = {
    "qwen/qwen3-tts": FIFO, "bosonai/higgs-tts-3-4b": FIFO,
    **{f"qwen/qwen3-tts-12hz-{v}": FIFO for v in ("0.6b-base", "1.7b-base", "0.6b-customvoice", "1.7b-customvoice")},
}
GOAL_RATE, GOAL_HALF_RATE_TTFA, GOAL_C8_TTFA = 1.5, 2.0, 2.0


def omni_bench(model: str, extra: list[str], args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", "omni_runtime.bench", "--model", model, "--device", "cpu", "--json",
        "--requests", str(args.requests), "--repeat", str(args.repeat), "--text-length", str(args.text_length), *extra,
    ]  # a later --requests in extra wins
    if model in SCHEDULED:
        cmd += ["--alt", f"fifo={SCHEDULED[model]}"]
    for option, per_model in (("--weights", args.weights), ("--voice", args.voice)):
        if model in per_model:
            cmd += [option, per_model[model]]
    began = time.perf_counter()
    load = os.getloadavg()[0]
    with LoadSampler() as sampler:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode != 0:
        raise SystemExit(f"omni bench failed for {model} ({' '.join(extra)}):\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout)
    report["load_before"], report["seconds"] = load, round(time.perf_counter() - began, 1)
    report["load_during"] = sampler.summary()
    print(
        f"  {model} {' '.join(extra)}: {report['seconds']} s, load average before {load:.1f}, during mean {report['load_during']['mean']:.1f} "
        f"max {report['load_during']['max']:.1f} (this run adds up to ~1-2 of it; {os.cpu_count()} CPUs)",
        file=sys.stderr, flush=True,
    )
    return report


class LoadSampler:
    """The 1-minute load average every 2 s while a run lasts: the machine is shared, so each row
    says how busy it was (a row measured at load 4 on 2 cores is noise-dominated)."""

    def __init__(self, interval: float = 2.0):
        self.interval, self.samples = interval, [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict[str, float]:
        return {"mean": round(sum(self.samples) / len(self.samples), 2), "max": round(max(self.samples), 2)}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def _spread(row: dict[str, Any], key: str) -> str:
    low, high = row["spread"].get(key, [None, None])
    return "-" if low is None else f"{low * 1000:.0f}-{high * 1000:.0f}"


def _ratio(value: float | None, base: float | None) -> str:
    return "-" if value is None or not base else f"{value / base:.2f}x"


def measure(model: str, args: argparse.Namespace) -> dict[str, Any]:
    closed = omni_bench(model, ["--concurrency", "1,8"], args)
    search = omni_bench(
        model,
        ["--max-rate", "--ttfa-bound-ms", str(args.ttfa_bound_ms), "--max-rate-start", str(args.max_rate_start), "--max-rate-steps", str(args.max_rate_steps),
         "--max-rate-window", str(args.window)],
        args,
    )
    found = search["max_rate"]["found"]
    deadline_max = found.get(f"current, {args.text_length} chars")
    half = None
    if deadline_max:
        half_rate = deadline_max / 2
        half = omni_bench(model, ["--rate", f"{half_rate:g}", "--requests", str(max(args.requests, math.ceil(half_rate * args.window)))], args)
    return {"model": model, "closed": closed, "search": search, "half": half, "found": found}


def _load_line(result: dict[str, Any]) -> str:
    parts = []
    for key in ("closed", "search", "half"):
        report = result.get(key)
        if report and "load_during" in report:
            load = report["load_during"]
            parts.append(f"{key} {load['mean']:.1f} (max {load['max']:.1f})")
    return f"load average during the runs ({os.cpu_count()} CPUs, shared): " + ", ".join(parts)


def goal_lines(result: dict[str, Any], args: argparse.Namespace) -> list[str]:
    model = result["model"]
    rows = result["closed"]["rows"]
    by = {(r["topology"], r["concurrency"]): r for r in rows}
    lines = [f"\n## {model}", "", _load_line(result), "", "| scheduler | conc | TTFA p50 ms (spread) | TTFA p95 ms | queue wait p50 ms | underruns (requests) | x real-time | c8/c1 TTFA p50 |", "|---|---|---|---|---|---|---|---|"]
    for topology in ("current", "fifo"):
        c1 = by.get((topology, 1))
        for conc in (1, 8):
            r = by.get((topology, conc))
            if r is None:
                continue
            name = "deadline" if topology == "current" and model in SCHEDULED else ("fifo" if topology == "fifo" else "-")
            ratio = _ratio(r["ttfa_p50_s"], c1["ttfa_p50_s"] if c1 else None) if conc == 8 else ""
            lines.append(f"| {name} | {conc} | {_ms(r['ttfa_p50_s'])} ({_spread(r, 'ttfa_p50_s')}) | {_ms(r['ttfa_p95_s'])} | {_ms(r.get('queue_wait_p50_s'))} | {r['underrun_events']} ({r['underrun_requests']}) | {r['audio_s_per_s']:.2f} | {ratio} |")
    lines += ["", "| scheduler | offered/s | completed/s | TTFA p50 ms | TTFA p95 ms (spread) | underruns (requests) | underrun spread | passes |", "|---|---|---|---|---|---|---|---|"]
    bound = args.ttfa_bound_ms / 1000
    for r in result["search"]["rows"]:
        name = "deadline" if r["topology"] == "current" and model in SCHEDULED else r["topology"]
        ok = r["failed"] == 0 and r["underrun_events"] == 0 and r["ttfa_p95_s"] is not None and r["ttfa_p95_s"] <= bound
        low, high = r["spread"]["underrun_events"]
        lines.append(
            f"| {name} | {r['offered_rate']:g} | {r['requests_per_s']:.2f} | {_ms(r['ttfa_p50_s'])} | {_ms(r['ttfa_p95_s'])} ({_spread(r, 'ttfa_p95_s')}) | "
            f"{r['underrun_events']} ({r['underrun_requests']}) | {low:g}-{high:g} | {'yes' if ok else 'no'} |"
        )
    found = result["found"]
    deadline = found.get(f"current, {args.text_length} chars")
    fifo = found.get(f"fifo, {args.text_length} chars")
    lines.append("")
    lines.append(f"max zero-underrun rate (p95 TTFA <= {args.ttfa_bound_ms:g} ms): " + ", ".join(f"{k}: {v if v is not None else 'none'}" for k, v in found.items()))
    if model in SCHEDULED:
        if deadline and fifo:
            verdict = "met" if deadline / fifo >= GOAL_RATE else "MISSED"
            lines.append(f"goal max rate deadline / fifo >= {GOAL_RATE}: {deadline / fifo:.2f}x -> {verdict}")
        else:
            lines.append(f"goal max rate deadline / fifo >= {GOAL_RATE}: deadline {deadline}, fifo {fifo} -> " + ("met (fifo served no rate)" if deadline and not fifo else "MISSED (undecided)"))
    c1 = by.get(("current", 1))
    c8 = by.get(("current", 8))
    if c1 and c8 and c1["ttfa_p50_s"]:
        ratio = c8["ttfa_p50_s"] / c1["ttfa_p50_s"]
        lines.append(f"goal TTFA p50 c8 / c1 <= {GOAL_C8_TTFA}: {ratio:.2f}x -> {'met' if ratio <= GOAL_C8_TTFA else 'MISSED'}")
    half = result["half"]
    if half and c1 and c1["ttfa_p50_s"]:
        for r in half["rows"]:
            name = "deadline" if r["topology"] == "current" and model in SCHEDULED else r["topology"]
            ratio = r["ttfa_p95_s"] / c1["ttfa_p50_s"] if r["ttfa_p95_s"] else None
            verdict = "" if name != "deadline" and model in SCHEDULED else (" -> met" if ratio is not None and ratio <= GOAL_HALF_RATE_TTFA else " -> MISSED")
            lines.append(
                f"{name} at half the max rate ({r['offered_rate']:g}/s): p95 TTFA {_ms(r['ttfa_p95_s'])} ms ({_spread(r, 'ttfa_p95_s')}), "
                f"{_ratio(r['ttfa_p95_s'], c1['ttfa_p50_s'])} the c1 TTFA p50, underruns {r['underrun_events']}" + (f"; goal <= {GOAL_HALF_RATE_TTFA}x{verdict}" if verdict else "")
            )
    elif not half:
        lines.append("goal p95 TTFA at half the max rate: not measured (no max rate found) -> MISSED")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--text-length", type=int, default=60)
    parser.add_argument("--ttfa-bound-ms", type=float, default=1500.0)
    parser.add_argument("--max-rate-start", type=float, default=0.25)
    parser.add_argument("--max-rate-steps", type=int, default=2)
    parser.add_argument("--window", type=float, default=10.0, help="seconds each open-loop rate is held (requests = max(--requests, rate x window))")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--weights", action="append", default=[], metavar="MODEL=DIR", help="checkpoint directory of a model (repeatable), e.g. a tiny random Qwen3-TTS 12 Hz checkpoint")
    parser.add_argument("--voice", action="append", default=[], metavar="MODEL=NAME", help="voice of a model's requests (repeatable; a CustomVoice checkpoint needs a speaker)")
    parser.add_argument("--json", metavar="FILE", default=None, help="also write every omni bench report here")
    args = parser.parse_args()
    for name in ("weights", "voice"):
        pairs = [item.partition("=") for item in getattr(args, name)]
        bad = [model for model, eq, value in pairs if not eq or not value]
        if bad:
            parser.error(f"--{name} takes MODEL=VALUE, got {', '.join(bad)}")
        setattr(args, name, {model: value for model, _, value in pairs})
    print(f"stream bench: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {args.requests} requests x {args.repeat} runs per row, {args.text_length} chars", flush=True)
    results = []
    for model in args.models.split(","):
        result = measure(model, args)
        results.append(result)
        print("\n".join(goal_lines(result, args)), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
