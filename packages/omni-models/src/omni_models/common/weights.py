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

from .parallel import Shard, full_shape, read_shard, shard_specs
from .sampling import stable_seed

LOAD_FORMATS = ("dummy", "safetensors")
DEFAULT_SEED = 1234


class CheckpointError(ValueError):
    """A checkpoint directory that does not fit the model (missing, unexpected or misshapen)."""


def init_dummy(module: nn.Module, seed: int) -> nn.Module:
    """Deterministic random weights: the same ``seed`` gives the same tensors on every machine.

    A tensor-parallel rank's sharded parameters are cut from the same full tensors, so every TP
    size gives the same model."""
    gen = torch.Generator(device="cpu")
    specs = shard_specs(module)
    with torch.no_grad():
        for name, param in sorted(module.named_parameters()):
            spec = specs.get(name)
            gen.manual_seed(stable_seed(seed, name))
            if param.dim() == 1:
                if name.endswith("bias"):
                    param.zero_()
                else:
                    param.fill_(1.0)
                continue
            shape = full_shape(specs, name, param)
            fan_in = math.prod(shape[1:])
            if isinstance(module.get_submodule(name.rsplit(".", 1)[0]) if "." in name else module, nn.Embedding):
                std = 1.0 / math.sqrt(param.shape[1])
            else:
                std = 1.0 / math.sqrt(fan_in)
            full = torch.randn(shape, generator=gen) * std
            param.copy_(spec.cut(full) if spec is not None else full)
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
    """Copy the tensors stored under ``<component>.`` into ``module``, all or nothing.

    A tensor-parallel rank reads only its slice of each sharded tensor (``read_shard``); the
    bytes it read are in ``module.checkpoint_bytes_read``."""
    prefix = component + "."
    specs = shard_specs(module)
    expected = {k: full_shape(specs, k, v) for k, v in module.state_dict().items()}
    found: dict[str, torch.Tensor] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for path in _checkpoint_files(model_path):
        with safe_open(str(path), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 - safe_open is not a dict
                if key.startswith(prefix):
                    name = key[len(prefix) :]
                    shapes[name] = tuple(handle.get_slice(key).get_shape())
                    if shapes[name] == expected.get(name):
                        found[name] = read_shard(handle, key, specs.get(name))
    missing = sorted(set(expected) - set(shapes))
    unexpected = sorted(set(shapes) - set(expected))
    wrong = sorted(k for k in set(shapes) & set(expected) if shapes[k] != expected[k])
    problems = []
    if missing:
        problems.append("missing " + ", ".join(prefix + k for k in missing[:5]) + (" ..." if len(missing) > 5 else ""))
    if unexpected:
        problems.append("unexpected " + ", ".join(prefix + k for k in unexpected[:5]) + (" ..." if len(unexpected) > 5 else ""))
    for k in wrong[:5]:
        problems.append(f"{prefix}{k} has shape {shapes[k]}, the model expects {expected[k]}")
    if problems:
        raise CheckpointError(f"checkpoint {str(model_path)!r} does not fit component {component!r}: " + "; ".join(problems))
    module.load_state_dict(found, strict=True)
    module.checkpoint_bytes_read = sum(t.numel() * t.element_size() for t in found.values())
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
    shard: Shard | None = None,
) -> nn.Module:
    """Get-or-load one component: a cache keyed by everything that determines its weights, so two
    stages of one process that use the same component (e.g. a codec) share it. ``shard``: this
    TP rank's slice (the builder takes it as ``shard``)."""
    if load_format not in LOAD_FORMATS:
        raise ValueError(f"load_format {load_format!r} is not supported; use one of: {', '.join(LOAD_FORMATS)}")
    module = build(spec) if shard is None else build(spec, shard)
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
