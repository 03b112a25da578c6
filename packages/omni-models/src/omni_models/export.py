"""Write a model's seeded random weights as a local safetensors checkpoint directory.

    python -m omni_models.export <model id> <directory> [--seed N]

The directory has the exact layout ``load_format: safetensors`` reads (one ``model.safetensors``
with ``<component>.`` key prefixes), so it is both a test fixture for the loading path and a
template for converted real weights.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .common.weights import DEFAULT_SEED

#: Model id -> folder. Immutable; the registry itself is the package's entry points.
MODEL_FOLDERS = (
    ("bosonai/higgs-tts-3-4b", "higgs_tts"),
    ("fishaudio/s2-pro", "fishaudio_s2_pro"),
    ("mistralai/voxtral-tts", "voxtral_tts"),
    ("inclusionai/ming-omni-tts", "ming_omni_tts"),
    ("openmoss/moss-tts-local", "moss_tts_local"),
    ("openmoss/moss-tts-local-split", "moss_tts_local"),
    ("qwen/qwen3-tts", "qwen3_tts"),
    ("openmoss/moss-tts-delay", "moss_tts_delay"),
    ("audar/audar-tts", "audar_tts"),
    ("funaudiollm/fun-cosyvoice3", "fun_cosyvoice3"),
    ("zyphra/zonos2", "zonos2"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m omni_models.export", description=__doc__.splitlines()[0])
    parser.add_argument("model", help="model id, e.g. qwen/qwen3-tts")
    parser.add_argument("directory", help="output directory (created if missing)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="weight seed (the stages' 'seed' factory arg)")
    args = parser.parse_args(argv)
    folders = dict(MODEL_FOLDERS)
    if args.model not in folders:
        print(f"error: unknown model {args.model!r}; known: {', '.join(folders)}", file=sys.stderr)
        return 1
    from .common.components import export_dummy_checkpoint

    stages = importlib.import_module(f"omni_models.{folders[args.model]}.stages")
    try:
        path = export_dummy_checkpoint(stages.components(), args.directory, seed=args.seed)
    except OSError as exc:
        print(f"error: cannot write {args.directory!r}: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
