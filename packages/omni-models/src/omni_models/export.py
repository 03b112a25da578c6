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
from typing import Any

from . import __version__
from .common.weights import DEFAULT_SEED


def _registered_packages() -> dict[str, str]:
    """Model id -> its package, read from this distribution's ``omni.models`` entry points (the registry)."""
    from importlib.metadata import entry_points

    found = (ep for ep in entry_points(group="omni.models") if ep.value.startswith("omni_models."))
    return {ep.name: ep.value.partition(":")[0] for ep in found}


def components_of(package: str) -> dict[str, Any] | None:
    """A model package's weight components: its catalog row's, or its own ``stages.components()``;
    None when it has no neural weights."""
    from .common.catalog import MODELS

    folder = package.rpartition(".")[2]
    row = next((spec for spec in MODELS if spec.name == folder), None)
    if row is not None:
        return row.components()
    try:
        stages = importlib.import_module(f"{package}.stages")
    except ModuleNotFoundError:
        return None
    return stages.components() if hasattr(stages, "components") else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m omni_models.export", description=__doc__.splitlines()[0])
    parser.add_argument("model", help="model id, e.g. qwen/qwen3-tts")
    parser.add_argument("directory", help="output directory (created if missing)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="weight seed (the stages' 'seed' factory arg)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    args = parser.parse_args(argv)
    packages = _registered_packages()
    if args.model not in packages:
        print(f"error: unknown model {args.model!r}; known: {', '.join(packages)}", file=sys.stderr)
        return 1
    from .common.components import export_dummy_checkpoint

    components = components_of(packages[args.model])
    if components is None:
        print(f"error: {args.model} has no neural weights to export (no catalog row, no components() in {packages[args.model]}.stages)", file=sys.stderr)
        return 1
    try:
        path = export_dummy_checkpoint(components, args.directory, seed=args.seed)
    except OSError as exc:
        print(f"error: cannot write {args.directory!r}: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
