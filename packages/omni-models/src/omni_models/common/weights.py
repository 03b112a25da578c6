"""Weights: seeded random initialisation (``load_format: dummy``) or a local safetensors
checkpoint directory (``load_format: safetensors``).

The real checkpoints cannot be downloaded in this environment, so every stage builds the torch
module of its architecture and fills it either with deterministic random weights derived from
``seed`` and the component name, or with the tensors under ``<component>.`` in the
``*.safetensors`` files of ``model_path``. Shapes must match exactly; a mismatch is an error
naming the directory, the key and both shapes. ``save_checkpoint`` writes such a directory.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from .sampling import stable_seed

LOAD_FORMATS = ("dummy", "safetensors")
DEFAULT_SEED = 1234


class CheckpointError(ValueError):
    """A checkpoint directory that does not fit the model (missing, unexpected or misshapen)."""


def init_dummy(module: nn.Module, seed: int) -> nn.Module:
    """Deterministic random weights: the same ``seed`` gives the same tensors on every machine."""
    gen = torch.Generator(device="cpu")
    with torch.no_grad():
        for name, param in sorted(module.named_parameters()):
            gen.manual_seed(stable_seed(seed, name))
            if param.dim() == 1:
                if name.endswith("bias"):
                    param.zero_()
                else:
                    param.fill_(1.0)
                continue
            fan_in = math.prod(param.shape[1:])
            if isinstance(module.get_submodule(name.rsplit(".", 1)[0]) if "." in name else module, nn.Embedding):
                std = 1.0 / math.sqrt(param.shape[1])
            else:
                std = 1.0 / math.sqrt(fan_in)
            param.copy_(torch.randn(param.shape, generator=gen) * std)
    return module


def _checkpoint_files(model_path: str | Path | None) -> list[Path]:
    if model_path is None:
        raise CheckpointError("load_format 'safetensors' needs model_path: the directory holding the checkpoint's *.safetensors files")
    root = Path(model_path)
    if not root.is_dir():
        raise CheckpointError(
            f"model_path {str(root)!r} is not a directory; with load_format 'safetensors' pass a local checkpoint "
            "directory (real checkpoints cannot be downloaded here), or use load_format 'dummy'"
        )
    files = sorted(root.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"model_path {str(root)!r} holds no *.safetensors file")
    return files


def load_safetensors(module: nn.Module, model_path: str | Path | None, component: str) -> nn.Module:
    """Copy the tensors stored under ``<component>.`` into ``module``, all or nothing."""
    prefix = component + "."
    found: dict[str, torch.Tensor] = {}
    for path in _checkpoint_files(model_path):
        with safe_open(str(path), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 - safe_open is not a dict
                if key.startswith(prefix):
                    found[key[len(prefix) :]] = handle.get_tensor(key)
    expected = dict(module.state_dict())
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    wrong = sorted(k for k in set(found) & set(expected) if tuple(found[k].shape) != tuple(expected[k].shape))
    problems = []
    if missing:
        problems.append("missing " + ", ".join(prefix + k for k in missing[:5]) + (" ..." if len(missing) > 5 else ""))
    if unexpected:
        problems.append("unexpected " + ", ".join(prefix + k for k in unexpected[:5]) + (" ..." if len(unexpected) > 5 else ""))
    for k in wrong[:5]:
        problems.append(f"{prefix}{k} has shape {tuple(found[k].shape)}, the model expects {tuple(expected[k].shape)}")
    if problems:
        raise CheckpointError(f"checkpoint {str(model_path)!r} does not fit component {component!r}: " + "; ".join(problems))
    module.load_state_dict(found, strict=True)
    return module


@functools.cache
def load_component(
    build: Callable[[Hashable], nn.Module],
    spec: Hashable,
    component: str,
    load_format: str,
    model_path: str | None,
    seed: int,
    device: str,
) -> nn.Module:
    """Get-or-load one component: a cache keyed by everything that determines its weights, so two
    stages of one process that use the same component (e.g. a codec) share it."""
    if load_format not in LOAD_FORMATS:
        raise ValueError(f"load_format {load_format!r} is not supported; use one of: {', '.join(LOAD_FORMATS)}")
    module = build(spec)
    if load_format == "dummy":
        init_dummy(module, stable_seed(seed, component))
    else:
        load_safetensors(module, model_path, component)
    module.requires_grad_(False)
    return module.eval().to(device)


def save_checkpoint(directory: str | Path, components: dict[str, nn.Module], filename: str = "model.safetensors") -> Path:
    """Write ``components`` as one safetensors file with ``<component>.`` key prefixes."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    tensors = {
        f"{name}.{key}": value.detach().cpu().contiguous()
        for name, module in components.items()
        for key, value in module.state_dict().items()
    }
    path = root / filename
    save_file(tensors, str(path))
    return path


def resolve_device(device: str | None) -> str:
    """The runtime passes ``cpu`` or ``cuda:N``; a direct call without one runs on the CPU."""
    return device or "cpu"
