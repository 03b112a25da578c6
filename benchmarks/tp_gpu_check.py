"""TP=2 on a GPU: parity with TP=1 and decode step time, for a machine that has CUDA.

Runs ``benchmarks/tp_bench.py``'s contenders with ``--device cuda``: every rank on a GPU (two
ranks share GPU 0 when there is only one), float32 weights read slice by slice from the same
checkpoint, collectives over NCCL when each rank has a GPU of its own. NCCL refuses two ranks of one
communicator on the same device, so with a single GPU the check runs the collectives over gloo
(on the CUDA tensors) and says so. Prints whether TP=2's greedy codes equal TP=1's at every
concurrency, the step times and the GPU memory of the weights per rank; exits 1 on a mismatch.
Without CUDA it says so and exits 0 (nothing to check here).

    python benchmarks/tp_gpu_check.py [--layers 12] [--dim 1024] [--frames 48]
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("tp_gpu_check: no CUDA device here; skipped (run it on a GPU machine)")
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import tp_bench

    args = tp_bench.parser(__doc__.split("\n\n")[0]).parse_args()
    args.device = "cuda"
    gpus = torch.cuda.device_count()
    if args.backend is None:
        args.backend = "nccl" if gpus >= 2 else "gloo"
    print(f"{gpus} GPU(s): {torch.cuda.get_device_name(0)}; TP=2 collectives over {args.backend}"
          + (" (NCCL cannot put two ranks of one group on one GPU)" if gpus < 2 and args.backend == "gloo" else ""))
    runs, params = tp_bench.run_both(args)
    tp1, tp2 = runs.values()
    print(f"engine: {params / 1e6:.1f} M parameters, float32")
    print("\n| concurrency | TP=1 step (ms) | TP=2 step (ms) | all-reduce per step (ms) | TP=2 / TP=1 speed | same greedy codes |")
    print("|---|---|---|---|---|---|")
    same_all = True
    for c in args.concurrency:
        a, b = tp1[0][c], tp2[0][c]
        same = a["codes"] == b["codes"]
        same_all &= same
        print(f"| {c} | {a['step_ms']:.2f} | {b['step_ms']:.2f} | {b['reduce_ms']:.2f} | {a['wall'] / b['wall']:.2f}x | {same} |")
    print("\n| contender | rank | weight memory on the GPU (MiB) |")
    print("|---|---|---|")
    for name, res in (("TP=1", tp1), ("TP=2", tp2)):
        for rank in sorted(res):
            print(f"| {name} | {rank} | {res[rank]['weight_rss'] / 2**20:.0f} |")
    return 0 if same_all else 1


if __name__ == "__main__":
    sys.exit(main())
