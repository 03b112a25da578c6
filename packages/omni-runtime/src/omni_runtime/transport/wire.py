"""The codec's wire format: MessagePack with three extension types, and its limits.

A body is MessagePack ``["omni", 1, shm_refs, tree]``. ``tree`` is the value
with three extension types: tuple marker (a tuple is an array whose first
element is the marker), tensor (``[dtype name, shape, where, index]``;
``where`` 0 = ``buffers[index]``, 1 = ``shm_refs[index]``) and out-of-line
bytes (``buffers[index]``). ``shm_refs`` lists ``[segment name, generation,
nbytes]``. Decoding an extension validates it at once (:func:`ext_hook`), so
a malformed message fails before anything is built from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from .dtypes import WIRE_ITEMSIZE
from .errors import CodecError

MAGIC = "omni"
VERSION = 1
EXT_TUPLE = 1
EXT_TENSOR = 2
EXT_BYTES = 3
TUPLE_MARK = msgspec.msgpack.Ext(EXT_TUPLE, b"")
WHERE_INLINE = 0
WHERE_SHM = 1
WHERE_CHUNKED = 2
"""A large tensor split into consecutive buffer frames (``index`` is the first); see ``Codec(chunk_bytes=...)``."""

INT_MIN = -(1 << 63)
INT_MAX = (1 << 64) - 1


@dataclass(frozen=True)
class CodecLimits:
    """Bounds enforced when decoding untrusted frames (and when encoding).

    ``max_body_bytes`` bounds the MessagePack body (tensors and large bytes
    travel outside it), ``max_buffer_bytes`` one out-of-line frame,
    ``max_buffers``/``max_shm_refs`` their counts, ``max_depth`` nesting,
    ``max_ndim`` tensor rank, ``max_shm_bytes`` one shared-memory tensor.
    """

    max_body_bytes: int = 64 << 20
    max_buffer_bytes: int = 1 << 31
    max_buffers: int = 65536
    max_shm_refs: int = 4096
    max_depth: int = 100
    max_ndim: int = 64
    max_shm_bytes: int = 1 << 40


class TensorRef:
    """A decoded tensor extension: where its bytes are and what they hold."""

    __slots__ = ("dtype", "index", "itemsize", "shape", "where")

    def __init__(self, dtype: str, shape: tuple[int, ...], where: int, index: int) -> None:
        self.dtype = dtype
        """The wire name (``"float32"``); the receiver's array backend turns it into a dtype."""
        self.itemsize = WIRE_ITEMSIZE[dtype]
        self.shape = shape
        self.where = where
        self.index = index


class BytesRef:
    """A decoded out-of-line bytes extension: the buffer frame it points at."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class TupleMark:
    __slots__ = ()


TUPLE_SENTINEL = TupleMark()
small_decoder = msgspec.msgpack.Decoder()
encoder = msgspec.msgpack.Encoder()


def tensor_ext_payload(dtype_name: str, shape: Sequence[int], where: int, index: int) -> bytes:
    return encoder.encode([dtype_name, list(shape), where, index])


def ext_hook(code: int, data: memoryview) -> Any:
    if code == EXT_TUPLE:
        if len(data):
            raise CodecError("malformed message: tuple marker carries data")
        return TUPLE_SENTINEL
    if code == EXT_TENSOR:
        try:
            meta = small_decoder.decode(data)
        except (msgspec.DecodeError, RecursionError) as exc:
            raise CodecError(f"malformed tensor header: {exc}") from None
        if not (isinstance(meta, list) and len(meta) == 4):
            raise CodecError("malformed tensor header: expected [dtype, shape, where, index]")
        name, shape, where, index = meta
        if not isinstance(name, str) or name not in WIRE_ITEMSIZE:
            raise CodecError(f"unknown tensor dtype {name!r} in message; the wire knows {sorted(WIRE_ITEMSIZE)} (sender and receiver versions differ?)")
        if not isinstance(shape, list) or not all(type(d) is int and 0 <= d < (1 << 62) for d in shape):
            raise CodecError(f"malformed tensor shape {shape!r} in message")
        if where not in (WHERE_INLINE, WHERE_SHM, WHERE_CHUNKED) or type(index) is not int or index < 0:
            raise CodecError(f"malformed tensor location {where!r}/{index!r} in message")
        return TensorRef(name, tuple(shape), where, index)
    if code == EXT_BYTES:
        try:
            index = small_decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise CodecError(f"malformed bytes reference: {exc}") from None
        if type(index) is not int or index < 0:
            raise CodecError(f"malformed bytes reference {index!r} in message")
        return BytesRef(index)
    raise CodecError(f"unknown type tag {code} in message (this codec knows 1=tuple, 2=tensor, 3=bytes)")


body_decoder = msgspec.msgpack.Decoder(ext_hook=ext_hook)


def path_str(path: list) -> str:
    out = "value"
    for p in path:
        out += f"[{p!r}]"
    return out


DEFAULT_LIMITS = CodecLimits()
