"""Wire names for tensor dtypes, and which array library a receiver decodes them into.

A tensor travels as ``(dtype name, shape, raw bytes)``. The name is the
dtype's own spelling without ``torch.`` (``"bfloat16"``, ``"float8_e4m3fn"``),
so the table is stable across torch versions and readable in a hex dump.

:data:`WIRE_ITEMSIZE` (name -> bytes per element) is all the wire format needs
and is plain data: parsing a message never imports torch, so the parent of a
run (``omni serve``) decodes results into numpy arrays without torch loaded.

The torch tables (:data:`DTYPE_BY_NAME`, :data:`NAME_BY_DTYPE`,
:data:`SUPPORTED_DTYPES`) are built on first use from the dtypes *this* torch
build can store and reinterpret as bytes: a dtype newer than the peer's torch
(e.g. a float8 variant) fails decoding with a clear :class:`CodecError`
instead of silently changing meaning. Quantized dtypes are excluded on
purpose: their scale and zero point are not raw bytes, so they would not
round-trip.

numpy has a dtype of the same name for :data:`NUMPY_NAMES`; the others
(bfloat16, complex32, the float8/float4 and bits families) have no numpy
equivalent, so a numpy receiver decodes those into torch tensors, importing
torch then and only then (no shipped model returns one to the parent; a value
never silently changes its meaning).
"""

from __future__ import annotations

import warnings
from typing import Any

#: Bytes per element of every dtype name the wire format knows, in a fixed order.
WIRE_ITEMSIZE: dict[str, int] = {
    "bool": 1,
    "uint8": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "complex32": 4,
    "complex64": 8,
    "complex128": 16,
    "float8_e4m3fn": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2": 1,
    "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
    "float4_e2m1fn_x2": 1,
    "bits8": 1,
    "bits16": 2,
    "bits1x8": 1,
    "bits2x4": 1,
    "bits4x2": 1,
}

#: Wire names numpy spells the same way (``numpy.dtype(name)``); the rest decode into torch tensors.
NUMPY_NAMES = frozenset(
    ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float16", "float32", "float64", "complex64", "complex128")
)


def _storable(torch: Any, dtype: Any) -> bool:
    try:
        with warnings.catch_warnings():
            # complex32 warns "experimental" on creation; probing is not use.
            warnings.simplefilter("ignore")
            t = torch.empty(2, dtype=dtype)
            t.view(torch.uint8)
            torch.empty(2 * t.element_size(), dtype=torch.uint8).view(dtype)
    except (RuntimeError, TypeError, NotImplementedError):
        return False
    return True


_TORCH_TABLES: tuple[dict[str, Any], dict[Any, str]] | None = None


def torch_tables() -> tuple[dict[str, Any], dict[Any, str]]:
    """``(dtype by name, name by dtype)`` for this torch build; imports torch (first call only builds)."""
    global _TORCH_TABLES
    if _TORCH_TABLES is None:
        import torch

        by_name: dict[str, Any] = {}
        by_dtype: dict[Any, str] = {}
        for name in WIRE_ITEMSIZE:
            dtype = getattr(torch, name, None)
            if not isinstance(dtype, torch.dtype) or dtype in by_dtype:
                continue
            if _storable(torch, dtype):
                by_name[name] = dtype
                by_dtype[dtype] = name
        _TORCH_TABLES = by_name, by_dtype
    return _TORCH_TABLES


def __getattr__(name: str) -> Any:
    """The torch tables as module attributes, built (and torch imported) only when asked for."""
    if name == "DTYPE_BY_NAME":
        return torch_tables()[0]
    if name == "NAME_BY_DTYPE":
        return torch_tables()[1]
    if name == "SUPPORTED_DTYPES":
        return tuple(torch_tables()[0].values())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
