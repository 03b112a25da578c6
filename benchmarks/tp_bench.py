"""Tensor parallelism on the CPU: TP=1 against TP=2 for a mid-size AR engine (``nox -s bench_tp``).

Each contender runs in fresh spawned processes (one per rank) that form their group, load the same
safetensors checkpoint through the stages' loader (TP ranks read only their slices), and then drive
the engine's own scheduler (``StepScheduler``, the code ``AREngine`` runs under every request) with
greedy requests of a fixed length, at concurrency 1 and 8. Equal work for both contenders: the
same checkpoint, prompts, lengths and thread count (one intra-op thread per rank).

Reported per contender:

- weight RSS per rank: the process's resident memory after loading minus before (goal for TP=2:
  at most 0.6x the TP=1 process);
- decode step time (wall time of the generation / scheduler steps) and the all-reduce time per
  step with its share of the step (rank 0's ``TPGroup`` counters);
- engine audio seconds per wall second: frames generated / 12.5 frames per second (the codec
  frame rate of the 12 Hz models) over the wall time.

Then the user's path: ``omni bench`` (``Runtime.submit``, streaming) on a registered model (Higgs-TTS
by default) with its engine at TP=1 and, as an ``--alt`` topology of the same run, at TP=2: audio
seconds per wall second and time to first audio at concurrency 1 and 8, with each process's RSS.

The machine's cores are shared (2 here): two ranks on two busy cores cannot run faster than one
process; the table shows what the collectives and the split cost, not a speed-up.

    python benchmarks/tp_bench.py [--layers 12] [--dim 1024] [--frames 48] [--concurrency 1,8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

FRAME_RATE = 12.5


def _config(args: argparse.Namespace) -> Any:
    from omni_models.common.ar import ARConfig

    return ARConfig(num_codebooks=8, codebook_size=1024, layout="parallel", dim=args.dim, layers=args.layers, heads=args.heads, max_seq_len=1024, cond_dim=64)


def _memory(device: str) -> int:
    """Resident bytes of this process (CPU), or bytes allocated on its GPU (CUDA)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)
        return torch.cuda.memory_allocated(device)
    import psutil

    return psutil.Process().memory_info().rss


def rank_main(rank: int, size: int, port: int, checkpoint: str, args: argparse.Namespace, threads: int, out: Any) -> None:
    try:
        _rank(rank, size, port, checkpoint, args, threads, out)
    except BaseException:
        import traceback

        out.put({"rank": rank, "error": traceback.format_exc()})
        raise


def _rank(rank: int, size: int, port: int, checkpoint: str, args: argparse.Namespace, threads: int, out: Any) -> None:
    import torch

    from omni_models.common.components import Loader, build_ar
    from omni_models.common.limits import GenerationLimits
    from omni_models.common.sampling import SamplingParams, generator_for
    from omni_models.common.scheduler import StepScheduler
    from omni_runtime.distributed import Rendezvous, backend_for, current, form

    torch.set_num_threads(threads)
    device = "cpu"
    if args.device == "cuda":  # ranks share the GPUs there are (two on one GPU is fine for a check)
        device = f"cuda:{rank % torch.cuda.device_count()}"
        torch.cuda.set_device(device)
    if size > 1:
        backend = args.backend or backend_for(device)
        form(Rendezvous("bench_engine", rank, size, "127.0.0.1", port, backend=backend, collective_timeout_s=300))
    before = _memory(device)
    model = Loader("safetensors", checkpoint, 1, device).get({"llm": (build_ar, _config(args))}, "llm")
    result: dict[str, Any] = {"rank": rank, "weight_rss": _memory(device) - before, "bytes_read": model.checkpoint_bytes_read}
    if rank > 0:
        model.tp_follower.thread.join()
        out.put(result)
        return
    group = current()
    scheduler = StepScheduler(model, name="bench")
    params = SamplingParams(temperature=0.0, top_k=0)

    def run(concurrency: int, seed: int) -> dict[str, float]:
        with torch.inference_mode():
            prompts = [model.prompt(list(range(3, 60)), model.voice(i % 4)) for i in range(concurrency)]
        limits = GenerationLimits(args.frames, args.frames)
        if group is not None:
            group.stats.reset()
        steps0 = scheduler.steps
        start = time.perf_counter()
        streams = [scheduler.submit(p, limits, params, generator_for("bench", seed + i)) for i, p in enumerate(prompts)]
        codes = [[f.tolist() for f in s] for s in streams]
        frames = sum(len(c) for c in codes)
        wall = time.perf_counter() - start
        steps = scheduler.steps - steps0
        reduce_s = group.stats.all_reduce_s if group is not None else 0.0
        return {"wall": wall, "frames": frames, "steps": steps, "step_ms": 1000 * wall / steps, "reduce_ms": 1000 * reduce_s / steps, "codes": codes}

    run(1, 999)  # warm-up
    for concurrency in args.concurrency:
        rounds = [run(concurrency, 100 * r) for r in range(args.rounds)]
        result[concurrency] = {k: statistics.median(r[k] for r in rounds) for k in rounds[0] if k != "codes"}
        result[concurrency]["codes"] = rounds[0]["codes"]
    scheduler.close()
    if model.decoder.mirror is not None:
        model.decoder.mirror.stop()
    out.put(result)


def contender(size: int, checkpoint: str, args: argparse.Namespace, threads: int = 1) -> dict[int, dict[str, Any]]:
    from omni_runtime.distributed import pick_port
    from omni_runtime.testing.ranks import run_ranks

    port = pick_port()
    results = {}
    for item in run_ranks(rank_main, [(r, size, port, checkpoint, args, threads) for r in range(size)], timeout=3600):
        if "error" in item:
            raise RuntimeError(f"TP={size} rank {item['rank']} failed:\n{item['error']}")
        results[item["rank"]] = item
    if len(results) != size:
        raise RuntimeError(f"TP={size}: only ranks {sorted(results)} reported")
    return results


def parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--frames", type=int, default=48, help="frames generated per request")
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--backend", choices=("gloo", "nccl"), default=None, help="collectives (default: gloo on the CPU, NCCL on CUDA)")
    parser.add_argument("--runtime-model", default="bosonai/higgs-tts-3-4b", help="model for the omni bench part ('' skips it)")
    parser.add_argument("--requests", type=int, default=8, help="omni bench: measured requests per concurrency")
    return parser


def user_path(args: argparse.Namespace) -> None:
    """``omni bench`` with the engine at TP=1 and at TP=2 (an --alt topology of the same run)."""
    import json
    import subprocess

    concurrency = ",".join(str(c) for c in args.concurrency)
    tp2 = "--stages.tts_engine.tp_size 2 --stages.tts_engine.gpu 0,1"
    cmd = [sys.executable, "-c", "import sys; from omni_runtime.cli import main; sys.exit(main())", "bench", "--model", args.runtime_model,
           "--device", args.device, "--json", "--requests", str(args.requests), "--concurrency", concurrency, "--text-length", "120",
           "--alt", f"tp2={tp2}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        print(f"\nomni bench failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
        return
    rows = {(r["topology"], r["concurrency"]): r for r in json.loads(proc.stdout)["rows"]}
    print(f"\nuser's path: omni bench --model {args.runtime_model} --device {args.device} ({args.requests} requests of 120 characters per row, streaming)")
    print("\n| concurrency | engine | audio s / wall s | vs TP=1 | TTFA p50 (ms) | failed | engine RSS per process (MiB) |")
    print("|---|---|---|---|---|---|---|")
    for c in args.concurrency:
        base = rows[("current", c)]
        for name, key in (("TP=1", "current"), ("TP=2", "tp2")):
            r = rows[(key, c)]
            rss = ", ".join(f"{k} {v:.0f}" for k, v in r["rss_mib"].items() if k.startswith("pipeline"))
            print(f"| {c} | {name} | {r['audio_s_per_s']:.2f} | {r['audio_s_per_s'] / base['audio_s_per_s']:.2f}x | "
                  f"{1000 * r['ttfa_p50_s']:.0f} | {r['failed']} | {rss} |")


def run_both(args: argparse.Namespace, tp1_threads: tuple[int, ...] = (1,)) -> tuple[dict[str, dict], float]:
    """TP=1 (with each of ``tp1_threads`` intra-op threads) and TP=2 (one thread per rank) on one
    freshly written checkpoint; returns each contender's results by name and the parameter count."""
    from omni_models.common.components import build_ar
    from omni_models.common.weights import init_dummy, save_checkpoint

    with tempfile.TemporaryDirectory(prefix="omni-tp-bench-") as tmp:
        model = init_dummy(build_ar(_config(args)), 1)
        params = sum(p.numel() for p in model.parameters())
        blocks = sum(p.numel() for p in model.decoder.blocks.parameters())
        save_checkpoint(tmp, {"llm": model})
        del model
        print(f"engine: {args.layers} layers, dim {args.dim}, {args.heads} heads, 8 codebooks x 1024 codes: "
              f"{params / 1e6:.1f} M parameters ({blocks / params:.0%} in the blocks, which TP shards), float32, "
              f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.2f}")
        results = {f"TP=1, {t} thread{'s' if t > 1 else ''}": contender(1, tmp, args, t) for t in tp1_threads}
        results["TP=2, 1 thread per rank"] = contender(2, tmp, args, 1)
        return results, params


def main() -> int:
    args = parser(__doc__.split("\n\n")[0]).parse_args()
    # TP=2 uses two cores (one thread per rank): TP=1 with two threads is the same CPU budget
    runs, _ = run_both(args, tp1_threads=(1, 2) if args.device == "cpu" else (1,))
    names = list(runs)
    base_name, tp2_name = names[0], names[-1]
    base = runs[base_name][0]["weight_rss"]
    print(f"\n| contender | rank | weight RSS (MiB) | vs {base_name} | checkpoint bytes read (MiB) |")
    print("|---|---|---|---|---|")
    for name, res in runs.items():
        for rank in sorted(res):
            r = res[rank]
            print(f"| {name} | {rank} | {r['weight_rss'] / 2**20:.0f} | {r['weight_rss'] / base:.2f}x | {r['bytes_read'] / 2**20:.0f} |")
    print(f"\n| concurrency | contender | decode step (ms) | all-reduce per step (ms) | all-reduce share | engine audio s / wall s | vs {base_name} |")
    print("|---|---|---|---|---|---|---|")
    for c in args.concurrency:
        base_wall = runs[base_name][0][c]["wall"]
        for name, res in runs.items():
            r = res[0][c]
            speed = r["frames"] / FRAME_RATE / r["wall"]
            print(f"| {c} | {name} | {r['step_ms']:.1f} | {r['reduce_ms']:.2f} | {r['reduce_ms'] / r['step_ms']:.0%} | {speed:.2f} | {base_wall / r['wall']:.2f}x |")
    same = all(runs[name][0][c]["codes"] == runs[tp2_name][0][c]["codes"] for name in names for c in args.concurrency)
    print(f"\ngreedy codes equal across contenders at every concurrency: {same}")
    if args.runtime_model:
        user_path(args)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
