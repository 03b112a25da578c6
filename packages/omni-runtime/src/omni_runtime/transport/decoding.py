"""The codec's receiving side: validate frames, then rebuild the value.

Decoding validates everything (magic, version, extension tags, dtype names,
shapes against byte lengths, indices, nesting depth, sizes) and raises
:class:`CodecError` on any mismatch. Inline tensors decode zero-copy over the
received ZeroMQ frame when it is writable (else from a private copy);
shared-memory tensors are copied out by the :class:`ShmReader`, which
releases the segment before returning.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import numpy as np

from .errors import CodecError
from .shm import ShmRef
from .wire import MAGIC, VERSION, WHERE_CHUNKED, WHERE_INLINE, BytesRef, CodecLimits, TensorRef, TupleMark, body_decoder

DECODED_SCALARS = frozenset({str, int, float, bool, bytes, type(None)})
"""Types MessagePack decodes to that the walk returns unchanged."""


def parse(frames: Sequence[Any], limits: CodecLimits) -> tuple[list[memoryview], list[ShmRef], Any]:
    """``(buffer frames, shared-memory references, tree)`` of one encoded value, all checked against ``limits``."""
    if not isinstance(frames, (list, tuple)) or not frames:
        raise CodecError("malformed message: no frames")
    if len(frames) - 1 > limits.max_buffers:
        raise CodecError(f"malformed message: {len(frames) - 1} buffer frames, over the limit of {limits.max_buffers}")
    views = []
    for f in frames:
        try:
            mv = memoryview(f)  # bytes, memoryview, zmq.Frame all export buffers
        except TypeError:
            raise CodecError(f"malformed message: frame of type {type(f).__name__} is not a buffer") from None
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        views.append(mv)
    body = views[0]
    if body.nbytes > limits.max_body_bytes:
        raise CodecError(f"message body of {body.nbytes} bytes exceeds the {limits.max_body_bytes}-byte limit")
    for mv in views[1:]:
        if mv.nbytes > limits.max_buffer_bytes:
            raise CodecError(f"buffer frame of {mv.nbytes} bytes exceeds the {limits.max_buffer_bytes}-byte limit")
    try:
        outer = body_decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise CodecError(f"malformed message body: {exc}") from None
    except RecursionError:
        raise CodecError("malformed message body: nesting too deep") from None
    if not (isinstance(outer, list) and len(outer) == 4 and outer[0] == MAGIC):
        raise CodecError("malformed message body: not an omni codec message (bad magic)")
    if outer[1] != VERSION:
        raise CodecError(f"unsupported codec version {outer[1]!r} (this side speaks {VERSION})")
    raw_refs = outer[2]
    if not isinstance(raw_refs, list) or len(raw_refs) > limits.max_shm_refs:
        raise CodecError("malformed message body: bad shared-memory reference table")
    refs = []
    for r in raw_refs:
        if not (isinstance(r, list) and len(r) == 3 and type(r[0]) is str and type(r[1]) is int and type(r[2]) is int and 0 <= r[2] <= limits.max_shm_bytes):
            raise CodecError(f"malformed shared-memory reference {r!r}")
        refs.append(ShmRef(r[0], r[1], r[2]))
    return views[1:], refs, outer[3]


class DecodeWalk:
    """One decode of one message: rebuilds the tree, tracking which buffers and references it used.

    Every buffer frame and every shared-memory reference must be used exactly
    once; :meth:`check_complete` says so at the end (a message that carries
    an unreferenced segment would otherwise pin it).
    """

    __slots__ = ("arrays", "bufs", "device", "limits", "read_shm", "refs", "used_bufs", "used_refs")

    def __init__(
        self,
        bufs: list[memoryview],
        refs: list[ShmRef],
        limits: CodecLimits,
        device: Any = None,
        read_shm: Callable[[ShmRef], np.ndarray] | None = None,
        arrays: Any = None,
    ) -> None:
        """``arrays``: the :mod:`.arrays` backend tensors become (torch or numpy); ``read_shm`` returns a flat ``uint8`` copy."""
        self.arrays = arrays
        self.bufs = bufs
        self.refs = refs
        self.limits = limits
        self.device = device
        self.read_shm = read_shm
        self.used_bufs: set[int] = set()
        self.used_refs: set[int] = set()

    def value(self, x: Any, depth: int = 0) -> Any:
        t = type(x)
        if t is str or t is int or t is float or t is bool or x is None or t is bytes:
            return x
        if depth >= self.limits.max_depth:
            raise CodecError(f"malformed message: nesting deeper than {self.limits.max_depth}")
        # Scalar members pass through here without a call each: payloads and headers
        # are mostly scalars, and a call per value was most of a small message's cost.
        if t is list:
            if x and type(x[0]) is TupleMark:
                return tuple(v if type(v) in DECODED_SCALARS else self.value(v, depth + 1) for v in x[1:])
            return [v if type(v) in DECODED_SCALARS else self.value(v, depth + 1) for v in x]
        if t is dict:
            out = {}
            for k, v in x.items():
                if type(k) is not str:
                    raise CodecError(f"malformed message: dict key {k!r} is not a str")
                out[k] = v if type(v) in DECODED_SCALARS else self.value(v, depth + 1)
            return out
        if t is TensorRef:
            tensor = self._tensor(x)
            if self.device is not None:
                tensor = self.arrays.to(tensor, self.device)
            return tensor
        if t is BytesRef:
            if x.index >= len(self.bufs) or x.index in self.used_bufs:
                raise CodecError(f"malformed message: bytes reference {x.index} is out of range or reused")
            self.used_bufs.add(x.index)
            return bytes(self.bufs[x.index])
        if t is TupleMark:
            raise CodecError("malformed message: tuple marker outside the first array slot")
        raise CodecError(f"malformed message: unexpected {t.__name__} value")

    def check_complete(self) -> None:
        if len(self.used_bufs) != len(self.bufs):
            raise CodecError(f"malformed message: {len(self.bufs) - len(self.used_bufs)} unreferenced buffer frame(s)")
        if len(self.used_refs) != len(self.refs):
            raise CodecError("malformed message: unreferenced shared-memory segment(s)")

    def _tensor(self, ref: TensorRef) -> Any:
        if len(ref.shape) > self.limits.max_ndim:
            raise CodecError(f"malformed message: tensor rank {len(ref.shape)} over the limit of {self.limits.max_ndim}")
        nbytes = math.prod(ref.shape) * ref.itemsize
        if ref.where == WHERE_CHUNKED:
            return self._joined(ref, nbytes)
        if ref.where == WHERE_INLINE:
            if ref.index >= len(self.bufs) or ref.index in self.used_bufs:
                raise CodecError(f"malformed message: tensor buffer {ref.index} is out of range or reused")
            self.used_bufs.add(ref.index)
            buf = self.bufs[ref.index]
            if buf.nbytes != nbytes:
                raise CodecError(f"malformed message: tensor {ref.dtype} {list(ref.shape)} needs {nbytes} bytes, frame has {buf.nbytes}")
            if nbytes == 0:
                return self.arrays.empty(ref.dtype, ref.shape)
            if buf.readonly:
                buf = bytearray(buf)  # never hand out an array over immutable memory
            return self.arrays.from_buffer(buf, ref.dtype, ref.shape)
        if ref.index >= len(self.refs) or ref.index in self.used_refs:
            raise CodecError(f"malformed message: shared-memory reference {ref.index} is out of range or reused")
        self.used_refs.add(ref.index)
        shm_ref = self.refs[ref.index]
        if shm_ref.nbytes != nbytes:
            raise CodecError(f"malformed message: tensor {ref.dtype} {list(ref.shape)} needs {nbytes} bytes, segment reference has {shm_ref.nbytes}")
        if self.read_shm is None:
            raise CodecError("malformed message: a shared-memory tensor where none may appear")
        flat = self.read_shm(shm_ref)
        if nbytes == 0:
            return self.arrays.empty(ref.dtype, ref.shape)
        return self.arrays.from_flat(flat, ref.dtype, ref.shape)

    def _joined(self, ref: TensorRef, nbytes: int) -> Any:
        """Copy a chunked tensor's consecutive frames into one new array (the frames must add up exactly)."""
        flat = np.empty(nbytes, dtype=np.uint8)
        filled, index = 0, ref.index
        while filled < nbytes:
            if index >= len(self.bufs) or index in self.used_bufs:
                raise CodecError(f"malformed message: chunked tensor needs {nbytes} bytes, its frames end after {filled}")
            self.used_bufs.add(index)
            part = self.bufs[index]
            if part.nbytes == 0 or filled + part.nbytes > nbytes:
                raise CodecError(f"malformed message: chunk frame {index} of {part.nbytes} bytes does not fit a {nbytes}-byte tensor")
            flat[filled : filled + part.nbytes] = part
            filled += part.nbytes
            index += 1
        return self.arrays.from_flat(flat, ref.dtype, ref.shape) if nbytes else self.arrays.empty(ref.dtype, ref.shape)
