"""What an ``omni`` command line selects: the pipeline, its weights and the device.

Every subcommand that runs or shows a pipeline (serve, synthesize, topology, bench) takes the
same words, resolved here once so they cannot drift apart:

- ``--model ID|FILE``: the pipeline, a registered model id or a pipeline YAML file;
- ``--config FILE``: a pipeline file or a deployment file (``extends:``), instead of ``--model``;
- ``--weights DIR``: a local safetensors checkpoint; every stage that loads weights (its
  ``factory_args`` declare ``load_format``) reads it with ``load_format: safetensors``. A model
  with an ``omni.checkpoints`` resolver (:mod:`omni_runtime.cli.checkpoints`) has it verified first,
  found in the local Hugging Face cache when absent, and may be served by the pipeline the
  resolver names (``bosonai/higgs-tts-3-4b`` with the published checkpoint runs the real model);
- ``--model-path``: the old name of ``--model``, accepted with a warning for one release;
- ``--device auto|cpu|cuda``: ``auto`` runs the declared GPU placement when torch sees CUDA and
  otherwise the CPU, saying so in one line.

Light on purpose: torch is asked (in a child process, :func:`probe_cuda`) only when the pipeline declares a GPU and the device is
not forced to the CPU.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "omni/espeak"
DEVICES = ("auto", "cpu", "cuda")
DEPRECATED_MODEL_PATH = (
    "omni: warning: --model-path is deprecated and will be removed in the next release; "
    "use --model ID|FILE for the pipeline (and --weights DIR for a safetensors checkpoint)"
)


class UserError(Exception):
    """A mistake on the command line; printed without a traceback, exit 1."""

    exit_code = 1


@dataclass(frozen=True)
class Pipeline:
    """A compiled topology, the name it is served under, and the weights and device it runs with."""

    topology: Any
    model_id: str
    weights: str | None
    device: str | None


def add_pipeline_arguments(parser: argparse.ArgumentParser, *, runs: bool = True) -> None:
    """``--model``/``--config``/``--weights``/``--gpus``, and ``--device`` for commands that run stages."""
    parser.add_argument("--model", metavar="ID|FILE", help=f"registered model id or pipeline YAML file (default: {DEFAULT_MODEL})")
    parser.add_argument("--config", metavar="FILE", help="pipeline file, or deployment file with 'extends:' (instead of --model)")
    parser.add_argument("--model-path", dest="model_path", metavar="ID", help="deprecated alias of --model (removed in the next release)")
    parser.add_argument("--gpus", type=_nonnegative_int, default=None, help="number of GPUs to check GPU ids against (default: what torch sees)")
    parser.add_argument(
        "--weights",
        metavar="DIR",
        help="local safetensors checkpoint directory: every stage that loads weights reads it (load_format: safetensors)",
    )
    if not runs:
        return
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="auto",
        help="auto: the declared GPUs when torch sees CUDA, else the CPU; cpu: every stage on the CPU; "
        "cuda: the declared GPUs or an error (default: %(default)s)",
    )


def model_argument(args: argparse.Namespace, warn: Any) -> str | None:
    """``--model``, or the deprecated ``--model-path`` with its warning."""
    old = getattr(args, "model_path", None)
    if old is None:
        return args.model
    if args.model is not None:
        raise UserError(
            f"error: --model {args.model} and --model-path {old}\n"
            "  rule: --model-path is the deprecated name of --model; give the pipeline once\n"
            "  fix:  drop --model-path"
        )
    if _is_checkpoint(Path(old)):
        raise UserError(
            f"error: --model-path {old}\n"
            "  rule: --model-path names the pipeline (a registered id or a pipeline YAML); this is a checkpoint directory\n"
            f"  fix:  --weights {old}  (and --model ID for the pipeline)"
        )
    warn(DEPRECATED_MODEL_PATH)
    return old


def load_pipeline(args: argparse.Namespace, announce: Any) -> Pipeline:
    """Load, override and compile the pipeline the arguments name; choose its device.

    ``announce`` prints one line to the user (the deprecation warning, the CPU fallback).
    """
    from omni_compiler import compile as compile_topology

    model = model_argument(args, announce)
    if args.config and model and Path(model).is_file():
        raise UserError(
            f"error: --config {args.config} and --model {model}\n"
            "  rule: both name a pipeline file; give one\n"
            "  fix:  drop one of them (a deployment file names its model with 'extends:')"
        )
    overrides = list(getattr(args, "overrides", ()))
    weights = getattr(args, "weights", None)
    pipeline = model  # the registered pipeline that runs; the command serves it under ``model``
    if getattr(args, "device", None) is not None and not args.config:  # a command that runs stages: find and verify a published checkpoint
        from .checkpoints import CheckpointProblem, resolve_checkpoint

        try:
            found = resolve_checkpoint(model, weights)
        except CheckpointProblem as exc:
            raise UserError(f"error: {exc}") from None
        weights, pipeline = found.directory, found.pipeline or model
    config = _load(args.config, pipeline, overrides)
    if weights is not None:
        config = _load(args.config, pipeline, [*weights_overrides(config, checkpoint_dir(weights), overrides), *overrides])
    if args.config:
        model_id = model or config.name or Path(args.config).stem
    else:
        model_id = model or DEFAULT_MODEL
    topology = compile_topology(config, num_gpus=args.gpus)
    requested = getattr(args, "device", None)
    if requested is None:  # omni topology: nothing runs, no device to choose
        return Pipeline(topology, model_id, weights, None)
    device, visible = choose_device(requested, declares_gpu(topology), announce)
    if visible is not None and args.gpus is None:  # check declared GPU ids against the GPUs torch sees
        topology = compile_topology(config, num_gpus=visible)
    return Pipeline(topology, model_id, None if weights is None else str(Path(weights).resolve()), device)


def _load(config_file: str | None, model: str | None, overrides: list[str]) -> Any:
    from omni_config import load_config, load_model

    if config_file:
        return load_config(config_file, overrides)
    return load_model(model or DEFAULT_MODEL, overrides)


def checkpoint_dir(path: str) -> Path:
    """The ``--weights`` directory, refused unless it holds ``*.safetensors`` files."""
    directory = Path(path)
    if not directory.is_dir():
        raise UserError(
            f"error: --weights {path}\n"
            "  rule: --weights takes a local directory of *.safetensors files; this is not a directory\n"
            "  fix:  pass the checkpoint directory (python -m omni_models.export MODEL DIR writes one in the expected layout)"
        )
    if not _is_checkpoint(directory):
        raise UserError(
            f"error: --weights {path}\n"
            "  rule: the directory holds no *.safetensors file\n"
            "  fix:  pass the directory that holds the checkpoint's *.safetensors files"
        )
    return directory


def weights_overrides(config: Any, directory: Path, user_overrides: list[str]) -> list[str]:
    """``load_format=safetensors`` for every stage whose ``factory_args`` declare ``load_format``.

    A stage whose ``load_format`` the user sets on the command line keeps the user's value.
    """
    loaders = [stage.name for stage in config.stages if "load_format" in (stage.factory_args or {})]
    if not loaders:
        raise UserError(
            f"error: --weights {directory}\n"
            f"  rule: no stage of {config.name or 'this pipeline'} loads weights (none declares factory_args.load_format)\n"
            "  fix:  drop --weights, or choose a model with neural stages (--model ID)"
        )
    chosen = {text[2:].split("=", 1)[0] for text in user_overrides if text.startswith("--")}
    return [
        f"--stages.{name}.factory_args.load_format=safetensors"
        for name in loaders
        if f"stages.{name}.factory_args.load_format" not in chosen
    ]


def declares_gpu(topology: Any) -> bool:
    return any(placement.gpu is not None for instance in topology.instances for placement in instance.stages)


_CUDA_PROBE = "import json, torch; print(json.dumps([torch.__version__, torch.cuda.is_available(), torch.cuda.device_count()]))"


def probe_cuda() -> tuple[str, bool, int]:
    """``(torch version, CUDA available, device count)`` as the workers' torch sees it, asked in a child process.

    The server process never imports torch (its results are numpy arrays), so
    ``--device auto`` asks the same interpreter, with the same environment
    (``CUDA_VISIBLE_DEVICES`` included), that the local workers and this host's
    Ray workers run: the answer means exactly what ``torch.cuda.is_available()``
    meant in-process before, on either backend, and costs one torch import in a
    short-lived child instead of the server's memory.
    """
    import json
    import subprocess
    import sys

    try:
        done = subprocess.run([sys.executable, "-c", _CUDA_PROBE], capture_output=True, text=True, timeout=300)
        version, available, count = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        reason = (getattr(exc, "stderr", None) or "").strip().splitlines()[-1:] or [str(exc)]
        raise UserError(
            "error: --device\n"
            f"  rule: the device is chosen by asking torch whether it sees CUDA, and that failed ({reason[0]})\n"
            "  fix:  --device cpu, or repair the torch install of this Python"
        ) from None
    return str(version), bool(available), int(count)


def choose_device(requested: str, needs_gpu: bool, announce: Any) -> tuple[str | None, int | None]:
    """The runtime's device (None: the declared placement) and, when CUDA is used, how many GPUs torch sees."""
    if requested == "cpu" or (requested == "auto" and not needs_gpu):
        return ("cpu" if requested == "cpu" else None), None
    version, available, count = probe_cuda()
    if available:
        return None, count
    if requested == "cuda":
        raise UserError(
            "error: --device cuda\n"
            f"  rule: torch {version} sees no CUDA device (torch.cuda.is_available() is False)\n"
            "  fix:  --device cpu, or install a CUDA build of torch on a machine with a GPU"
        )
    announce("omni: torch sees no CUDA device; running every stage on the CPU (placement accounting unchanged)")
    return "cpu", None


def _is_checkpoint(path: Path) -> bool:
    return path.is_dir() and any(path.glob("*.safetensors"))


def _nonnegative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value
