"""What a receiver decodes tensors into: torch tensors (a worker) or numpy arrays (the parent).

The wire carries ``(dtype name, shape, bytes)`` and says nothing about the
array library; the receiver picks one with ``Codec(arrays="torch"|"numpy")``.
Workers run stage code, which works on torch tensors, so they decode into
torch. The parent only forwards audio to HTTP clients and encoders, which
take numpy, so ``omni serve`` decodes into numpy and never loads torch (about
a second and hundreds of MB per server process).

Both backends build the array over one flat ``uint8`` numpy array of the
tensor's bytes (a received frame, a shared-memory copy or a joined chunk
list), so there is exactly one place where bytes become a typed array.
Dtypes numpy has no equivalent for (bfloat16, float8, ...) decode into torch
tensors on the numpy backend too, importing torch only then (see
:mod:`.dtypes`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import NUMPY_NAMES, WIRE_ITEMSIZE, torch_tables
from .errors import CodecError

ARRAY_KINDS = ("torch", "numpy")


class TorchArrays:
    """Decode into ``torch.Tensor`` (the worker's choice; ``device`` moves them)."""

    name = "torch"

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.by_name = torch_tables()[0]

    def dtype(self, name: str) -> Any:
        dtype = self.by_name.get(name)
        if dtype is None:
            raise CodecError(
                f"tensor dtype {name!r} in message is not supported by this torch {self.torch.__version__} "
                f"(it supports {sorted(self.by_name)}); sender and receiver torch versions differ?"
            )
        return dtype

    def empty(self, name: str, shape: tuple[int, ...]) -> Any:
        return self.torch.empty(shape, dtype=self.dtype(name))

    def from_flat(self, flat: np.ndarray, name: str, shape: tuple[int, ...]) -> Any:
        """A tensor over ``flat`` (writable ``uint8``, exactly the tensor's bytes; no copy)."""
        t = self.torch.from_numpy(flat)
        if name != "uint8":
            t = t.view(self.dtype(name))
        return t if len(shape) == 1 else t.view(shape)

    def from_buffer(self, buf: Any, name: str, shape: tuple[int, ...]) -> Any:
        """A tensor over the writable buffer ``buf`` (a received frame; no copy): the inline path, kept lean."""
        t = self.torch.frombuffer(buf, dtype=self.dtype(name))
        return t if len(shape) == 1 else t.view(shape)

    def to(self, value: Any, device: Any) -> Any:
        return value.to(device)


class NumpyArrays:
    """Decode into ``numpy.ndarray`` (the parent's choice); dtypes numpy lacks fall back to torch."""

    name = "numpy"

    def __init__(self) -> None:
        self._torch: TorchArrays | None = None

    def _fallback(self) -> TorchArrays:
        if self._torch is None:
            self._torch = TorchArrays()
        return self._torch

    def empty(self, name: str, shape: tuple[int, ...]) -> Any:
        if name not in NUMPY_NAMES:
            return self._fallback().empty(name, shape)
        return np.empty(shape, dtype=name)

    def from_flat(self, flat: np.ndarray, name: str, shape: tuple[int, ...]) -> Any:
        if name not in NUMPY_NAMES:
            return self._fallback().from_flat(flat, name, shape)
        return flat.view(name).reshape(shape)

    def from_buffer(self, buf: Any, name: str, shape: tuple[int, ...]) -> Any:
        if name not in NUMPY_NAMES:
            return self._fallback().from_buffer(buf, name, shape)
        return np.frombuffer(buf, dtype=name).reshape(shape)

    def to(self, value: Any, device: Any) -> Any:
        if str(device) == "cpu":
            return value
        raise ValueError(f"a codec decoding into numpy arrays keeps them on the CPU; decode(device={device!r}) needs Codec(arrays='torch')")


def array_backend(kind: str) -> TorchArrays | NumpyArrays:
    """The backend named ``kind`` (one of :data:`ARRAY_KINDS`)."""
    if kind == "torch":
        return TorchArrays()
    if kind == "numpy":
        return NumpyArrays()
    raise ValueError(f"arrays={kind!r}: must be one of {', '.join(ARRAY_KINDS)}")


def numpy_wire_name(array: np.ndarray) -> str | None:
    """The wire name of a numpy array's dtype, or None when the wire has no such dtype (object, str, datetime ...)."""
    name = array.dtype.name
    return name if name in NUMPY_NAMES and name in WIRE_ITEMSIZE else None


def tensor_bytes(torch: Any, x: Any, name: str) -> memoryview | bytes:
    """Zero-copy byte view of a contiguous CPU tensor (keeps it alive); ``name`` is its wire dtype name."""
    if x.numel() == 0:
        return b""
    if x.dim() != 1:
        x = x.reshape(-1)
    if name in NUMPY_NAMES:
        return memoryview(x.numpy())  # cheaper than a torch uint8 view
    return memoryview(x.view(torch.uint8).numpy())
