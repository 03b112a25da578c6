"""Wire names for torch dtypes.

A tensor travels as ``(dtype name, shape, raw bytes)``. The name is the
dtype's own spelling without ``torch.`` (``"bfloat16"``, ``"float8_e4m3fn"``),
so the table is stable across torch versions and readable in a hex dump.

The table is built at import from the dtypes *this* torch build can store and
reinterpret as bytes: a dtype newer than the peer's torch (e.g. a float8
variant) fails decoding with a clear :class:`CodecError` instead of silently
changing meaning. Quantized dtypes are excluded on purpose: their scale and
zero point are not raw bytes, so they would not round-trip.
"""

from __future__ import annotations

import warnings

import torch

# Candidate names, in a fixed order. Names that this torch does not have, or
# whose tensors cannot be viewed as bytes (sub-byte shell dtypes such as
# ``uint4``), are skipped when the table is built.
_CANDIDATES = (
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex32",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "bits8",
    "bits16",
    "bits1x8",
    "bits2x4",
    "bits4x2",
)


def _storable(dtype: torch.dtype) -> bool:
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


def _build() -> tuple[dict[str, torch.dtype], dict[torch.dtype, str]]:
    by_name: dict[str, torch.dtype] = {}
    by_dtype: dict[torch.dtype, str] = {}
    for name in _CANDIDATES:
        dtype = getattr(torch, name, None)
        if not isinstance(dtype, torch.dtype) or dtype in by_dtype:
            continue
        if _storable(dtype):
            by_name[name] = dtype
            by_dtype[dtype] = name
    return by_name, by_dtype


DTYPE_BY_NAME, NAME_BY_DTYPE = _build()

#: Every dtype the codec can carry with this torch build.
SUPPORTED_DTYPES: tuple[torch.dtype, ...] = tuple(DTYPE_BY_NAME.values())
