"""Megatron-style tensor parallelism for the AR transformers: sharded linears and slice loading.

Each rank of a TP group (``Shard(rank, size)``) holds a slice of every large weight of the
transformer blocks:

- column-parallel (``ColumnParallelLinear``): the output features are split, so each rank
  computes its own attention heads (the fused ``qkv`` projection: its slice of q, of k and of v)
  and its own part of the MLP's hidden layer (the fused ``gate_up``: its slice of gate and of up);
  no communication;
- row-parallel (``RowParallelLinear``): the input features are split (the attention output
  projection over the rank's heads, the MLP's ``down`` over its hidden slice); each rank's result
  is a partial sum, and one all-reduce per attention block and one per MLP block (Megatron's ``g``
  operator; two per transformer layer) gives every rank the full residual stream again.

Embeddings and output heads are **replicated**, not vocabulary-parallel: a codec-token model's
vocabularies are small (``K`` codebooks of 1-4 k codes, a few hundred text bytes), a few percent of
the weights next to the blocks, and only rank 0 runs them (it embeds the step's inputs, computes
logits and samples; the other ranks receive the embedded inputs by broadcast and run the blocks).
Replication therefore costs no communication at all, where a vocabulary-parallel head would need an
all-gather of the logits every step. The price is their memory on every rank, which the benchmark
(``benchmarks/tp_bench.py``) shows next to the sharded blocks.

Parameters keep the names and the *checkpoint* shapes of the unsharded model: a ``ShardSpec``
says how a rank's parameter is cut from the full tensor, so seeded dummy weights are cut from the
same full tensors (TP=N gives TP=1's model) and a safetensors checkpoint is read slice by slice
(``read_shard``), never loaded whole and then split.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Shard:
    """This rank's place in its TP group (hashable: part of the weight cache's key)."""

    rank: int = 0
    size: int = 1

    def __post_init__(self) -> None:
        if self.size < 1 or not 0 <= self.rank < self.size:
            raise ValueError(f"TP rank {self.rank} is outside a group of size {self.size}")

    def split(self, n: int, what: str) -> int:
        """``n / size``; a clear error when ``n`` does not divide (the model cannot run at this TP size)."""
        if n % self.size:
            raise ValueError(f"{what} of {n} does not split across tp_size {self.size}; choose a tp_size that divides {n}")
        return n // self.size


NO_SHARD = Shard()


@dataclass(frozen=True)
class ShardSpec:
    """How one rank's parameter is cut from the checkpoint's full tensor.

    ``parts``: sizes of the fused blocks along ``dim`` (``qkv``: three of ``dim``); each block is
    split evenly and the rank's pieces are concatenated.
    """

    full_shape: tuple[int, ...]
    dim: int
    parts: tuple[int, ...]
    shard: Shard

    def ranges(self) -> list[tuple[int, int]]:
        out, offset = [], 0
        for part in self.parts:
            step = part // self.shard.size
            out.append((offset + self.shard.rank * step, offset + (self.shard.rank + 1) * step))
            offset += part
        return out

    def cut(self, full: torch.Tensor) -> torch.Tensor:
        """This rank's slice of the full tensor."""
        return torch.cat([full.narrow(self.dim, a, b - a) for a, b in self.ranges()], dim=self.dim)

    def read(self, tensor_slice) -> torch.Tensor:
        """This rank's slice from a safetensors ``get_slice`` handle: only these bytes are read."""
        if self.dim == 0:
            pieces = [tensor_slice[a:b] for a, b in self.ranges()]
        else:
            pieces = [tensor_slice[:, a:b] for a, b in self.ranges()]
        return pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=self.dim)


class ColumnParallelLinear(nn.Linear):
    """``nn.Linear(in, out)`` holding this rank's slice of each of ``parts`` output blocks."""

    def __init__(self, in_features: int, parts: tuple[int, ...], shard: Shard, *, bias: bool = False, what: str = "output features"):
        local = sum(shard.split(p, what) for p in parts)
        super().__init__(in_features, local, bias=bias)
        self.weight_spec = ShardSpec((sum(parts), in_features), 0, parts, shard)
        self.bias_spec = ShardSpec((sum(parts),), 0, parts, shard) if bias else None


class RowParallelLinear(nn.Linear):
    """``nn.Linear(in, out)`` over this rank's slice of the input features; the result is a
    partial sum the caller all-reduces (no bias: it would be added once per rank)."""

    def __init__(self, in_features: int, out_features: int, shard: Shard, *, what: str = "input features"):
        super().__init__(shard.split(in_features, what), out_features, bias=False)
        self.weight_spec = ShardSpec((out_features, in_features), 1, (in_features,), shard)


def column_linear(in_features: int, parts: tuple[int, ...], shard: Shard | None, *, bias: bool = False, what: str = "output features") -> nn.Linear:
    """A plain ``nn.Linear`` without TP, else its column-parallel slice (a constructor model code calls)."""
    if shard is None or shard.size == 1:
        return nn.Linear(in_features, sum(parts), bias=bias)
    return ColumnParallelLinear(in_features, parts, shard, bias=bias, what=what)


def row_linear(in_features: int, out_features: int, shard: Shard | None, *, what: str = "input features") -> nn.Linear:
    """A plain ``nn.Linear`` without TP, else its row-parallel slice (the caller all-reduces)."""
    if shard is None or shard.size == 1:
        return nn.Linear(in_features, out_features, bias=False)
    return RowParallelLinear(in_features, out_features, shard, what=what)


def shard_specs(module: nn.Module) -> dict[str, ShardSpec]:
    """Parameter name -> its ``ShardSpec``, for every sharded parameter of ``module``."""
    specs = {}
    for name, sub in module.named_modules():
        prefix = f"{name}." if name else ""
        for attr, param in (("weight_spec", "weight"), ("bias_spec", "bias")):
            spec = getattr(sub, attr, None)
            if spec is not None:
                specs[prefix + param] = spec
    return specs


def full_shape(specs: dict[str, ShardSpec], name: str, tensor: torch.Tensor) -> tuple[int, ...]:
    """The checkpoint shape of parameter ``name`` (its own shape when it is not sharded)."""
    spec = specs.get(name)
    return spec.full_shape if spec is not None else tuple(tensor.shape)


def read_shard(handle, key: str, spec: ShardSpec | None) -> torch.Tensor:
    """Parameter ``key`` from an open safetensors file: its slice when sharded, else the whole tensor."""
    if spec is None:
        return handle.get_tensor(key)
    return spec.read(handle.get_slice(key))


def model_shard(size: int, rank: int | None) -> Shard | None:
    """The ``Shard`` of a rank (None for TP=1)."""
    return Shard(rank or 0, size) if size > 1 else None


def process_shard(build) -> tuple[Shard | None, object]:
    """This process's ``Shard`` and TP group when it is a rank of one and ``build`` takes a ``shard``
    (the model can be sharded), else ``(None, None)``: the component is built whole."""
    import inspect

    from omni_runtime.distributed import current

    group = current()
    if group is None or group.size == 1:
        return None, None
    try:
        takes = "shard" in inspect.signature(build).parameters
    except (TypeError, ValueError):
        takes = False
    return (Shard(group.rank, group.size), group) if takes else (None, None)


_building: ContextVar[Shard | None] = ContextVar("omni_tp_building", default=None)


@contextlib.contextmanager
def building(shard: Shard | None) -> Iterator[None]:
    """While a model is constructed inside this block, ``column``/``row`` build this rank's slices.

    The hook for stacks that create their projections through constructor functions of their own
    (``column_linear(in, out, bias)`` / ``row_linear(in, out, bias)``, as the Qwen3 talker's layers
    do): those functions call ``column``/``row`` and the stack needs no shard argument threaded
    through every block. Outside the block (or with ``None``) they build plain ``nn.Linear``.
    """
    token = _building.set(shard)
    try:
        yield
    finally:
        _building.reset(token)


def column(in_features: int, out_features: int, bias: bool = False) -> nn.Linear:
    """A column-parallel projection of the model being built (``building``), else a plain one."""
    return column_linear(in_features, (out_features,), _building.get(), bias=bias)


def row(in_features: int, out_features: int, bias: bool = False) -> nn.Linear:
    """A row-parallel projection of the model being built (``building``; no bias under TP), else a plain one."""
    shard = _building.get()
    if shard is None or shard.size == 1:
        return nn.Linear(in_features, out_features, bias=bias)
    if bias:
        raise ValueError("a row-parallel projection cannot carry a bias (each rank would add it once); keep it outside the sharded linear")
    return RowParallelLinear(in_features, out_features, shard)
