"""Qwen3-TTS 12 Hz on the CPU: omni's batched engine against the reference package (qwen-tts).

A mid-size random CustomVoice checkpoint in the published layout (written by the reference's own
classes; ``--hidden``/``--layers`` size it) is served three ways at equal work (the same 8
texts and speakers, the same ``max_new_tokens``, greedy talker and sub-talker, so both produce
the same codes; one warm-up request each):

* **omni**: the pipeline through ``Runtime.submit`` (preprocessing -> talker engine under the
  continuous-batching scheduler => streaming vocoder, one worker process), at concurrency 1
  (the texts one after another) and 8 (all at once);
* **reference, batched**: ``generate_custom_voice`` with all 8 texts in one call (its fastest form);
* **reference, one call per text**: ``generate_custom_voice`` once per text (how a user calls it).

Figures: audio seconds per wall second, time to first audio (omni: submit to the first streamed
chunk; the reference returns only whole waveforms, so its TTFA is the time to the whole
waveform), and peak RSS (each contender in a fresh process; omni's summed with its worker).
Every contender runs with the same torch thread count (``--threads``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packages" / "omni-models" / "parity_tests"))

TEXTS = [
    "hello the voice of the assistant",
    "the user says hello, twice, and the assistant answers",
    "one two three four five six",
    "a longer sentence for the benchmark so that the prompts differ in length",
    "voice hello voice",
    "the assistant speaks to the user",
    "hello hello",
    "numbers and words, words and numbers",
]
SPEAKERS = ["vivian", "dylan", "eric"]
MODEL_ID = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"


def rss_mib() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + children) / 1024


def run_reference(directory: str, mode: str, max_new: int, threads: int) -> dict:
    import torch
    from qwen3_tts_reference import load_reference

    torch.set_num_threads(threads)
    model = load_reference(Path(directory))
    kwargs = {"language": "english", "do_sample": False, "subtalker_dosample": False, "max_new_tokens": max_new}
    model.generate_custom_voice(TEXTS[:1], speaker=SPEAKERS[:1], **kwargs)  # warm-up
    start = time.perf_counter()
    ttfa = []
    samples = 0
    if mode == "batched":
        wavs, rate = model.generate_custom_voice(TEXTS, speaker=[SPEAKERS[i % 3] for i in range(len(TEXTS))], **kwargs)
        ttfa = [time.perf_counter() - start] * len(TEXTS)
        samples = sum(len(w) for w in wavs)
    else:
        for i, text in enumerate(TEXTS):
            t0 = time.perf_counter()
            wavs, rate = model.generate_custom_voice([text], speaker=[SPEAKERS[i % 3]], **kwargs)
            ttfa.append(time.perf_counter() - t0)
            samples += len(wavs[0])
    wall = time.perf_counter() - start
    return {"audio_s": samples / rate, "wall_s": wall, "ttfa_s": ttfa, "rss_mib": rss_mib()}


async def _omni(directory: str, concurrency: int, max_new: int, threads: int) -> dict:
    from omni_compiler import compile as compile_topology
    from omni_config import load_model
    from omni_runtime import Runtime

    overrides = [f"--stages.{s}.factory_args.num_threads={threads}" for s in ("preprocessing", "tts_engine", "vocoder")]
    topology = compile_topology(load_model(MODEL_ID, overrides))
    runtime = Runtime(topology, device="cpu", model_path=directory, log=lambda *_: None)
    await runtime.start()
    try:
        async def one(i: int) -> tuple[float, int]:
            t0 = time.perf_counter()
            handle = await runtime.submit({"text": TEXTS[i], "voice": SPEAKERS[i % 3], "language": "english", "temperature": 0, "max_new_tokens": max_new})
            first, samples = None, 0
            async for chunk in handle.stream():
                first = first if first is not None else time.perf_counter() - t0
                samples += chunk["audio"].shape[-1]
            await handle.result()
            return first or 0.0, samples

        await one(0)  # warm-up
        start = time.perf_counter()
        if concurrency == 1:
            results = [await one(i) for i in range(len(TEXTS))]
        else:
            results = await asyncio.gather(*(one(i) for i in range(len(TEXTS))))
        wall = time.perf_counter() - start
    finally:
        await runtime.shutdown()
    return {"audio_s": sum(s for _, s in results) / 24000, "wall_s": wall, "ttfa_s": [t for t, _ in results], "rss_mib": rss_mib()}


def child(args: argparse.Namespace) -> None:
    if args.run.startswith("omni"):
        result = asyncio.run(_omni(args.checkpoint, int(args.run.split("-")[1]), args.max_new_tokens, args.threads))
    else:
        result = run_reference(args.checkpoint, args.run.split("-", 1)[1], args.max_new_tokens, args.threads)
    print("RESULT " + json.dumps(result))


def measure(run: str, checkpoint: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--run", run, "--checkpoint", checkpoint, "--max-new-tokens", str(args.max_new_tokens), "--threads", str(args.threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"{run} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", help="an existing checkpoint directory (default: write one)")
    parser.add_argument("--hidden", type=int, default=512, help="talker hidden size of the written checkpoint")
    parser.add_argument("--layers", type=int, default=8, help="talker layers of the written checkpoint")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for every contender (default 1: on a shared CPU, more threads mostly wait on each other)")
    args = parser.parse_args()
    if args.run:
        child(args)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = args.checkpoint
        if checkpoint is None:
            from qwen3_tts_reference import write_checkpoint

            checkpoint = str(write_checkpoint(Path(tmp) / "ckpt", "custom_voice", hidden=args.hidden, layers=args.layers, heads=8,
                                              predictor_hidden=args.hidden // 2, predictor_layers=3, text_hidden=args.hidden, codec_hidden=128,
                                              groups=16, decoder_dim=256, seed=11))
        rows = {name: measure(name, checkpoint, args) for name in ("omni-1", "omni-8", "ref-batched", "ref-loop")}
    print(render(rows, args))
    return 0


def render(rows: dict, args: argparse.Namespace) -> str:
    rate = {k: v["audio_s"] / v["wall_s"] for k, v in rows.items()}
    lines = [
        f"Qwen3-TTS 12 Hz CustomVoice, random checkpoint in the published layout (talker {args.hidden} x {args.layers} layers, 16 codebooks), "
        f"CPU, {args.threads} torch threads, 8 texts, max_new_tokens {args.max_new_tokens}, greedy",
        "",
        "| contender | concurrency | audio s | wall s | audio s / wall s | TTFA p50 s | peak RSS MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    names = {"omni-1": ("omni (Runtime.submit, streaming)", 1), "omni-8": ("omni (Runtime.submit, streaming)", 8),
             "ref-loop": ("qwen-tts, one call per text", 1), "ref-batched": ("qwen-tts, one batched call of 8", 8)}
    for key, (label, conc) in names.items():
        r = rows[key]
        lines.append(f"| {label} | {conc} | {r['audio_s']:.2f} | {r['wall_s']:.2f} | {rate[key]:.3f} | {statistics.median(r['ttfa_s']):.2f} | {r['rss_mib']:.0f} |")
    lines += [
        "",
        f"omni c=8 vs reference batched call: {rate['omni-8'] / rate['ref-batched']:.2f}x (goal >= 1x)",
        f"omni c=8 vs reference one call per text: {rate['omni-8'] / rate['ref-loop']:.2f}x (goal >= 4x)",
        f"omni c=1 vs reference one call per text: {rate['omni-1'] / rate['ref-loop']:.2f}x (goal >= 1x)",
        "TTFA: omni = submit to the first streamed audio chunk; qwen-tts returns whole waveforms only (TTFA = time to the whole waveform).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
