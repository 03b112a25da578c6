"""Typed, pickle-free codec for stage payloads.

Supported values (the stage contract's "codec types"): ``dict`` with ``str``
keys, ``list``, ``tuple`` (decodes as a tuple), ``str``, ``int`` (within
int64/uint64), ``float``, ``bool``, ``None``, ``bytes`` and ``torch.Tensor``
of every dtype in :data:`~omni_runtime.transport.dtypes.SUPPORTED_DTYPES`
(bfloat16, bool, complex, float8 ... ) and any shape, 0-d and empty included.
Anything else raises :class:`CodecError` naming the path inside the value
(``data["voice"]["emb"][1]``) and the fix. There is no pickle fallback, by
design: a payload must be data, not code.

Wire format
-----------
``encode`` returns frames ``[body, *buffers]``:

* ``body`` is MessagePack ``["omni", 1, shm_refs, tree]``. ``tree`` is the
  value with three extension types: tuple marker (a tuple is an array whose
  first element is the marker), tensor (``[dtype name, shape, where,
  index]``; ``where`` 0 = ``buffers[index]``, 1 = ``shm_refs[index]``) and
  out-of-line bytes (``buffers[index]``). ``shm_refs`` lists
  ``[segment name, generation, nbytes]``.
* ``buffers`` are the raw bytes of tensors below the shared-memory
  threshold and of ``bytes`` values >= ``inline_bytes_max``, passed to
  ZeroMQ as separate zero-copy frames (memoryviews of the tensors
  themselves; contiguous CPU tensors are not copied at all).
* Tensors of ``shm_threshold`` bytes or more go through the sender's
  :class:`~omni_runtime.transport.shm.ShmPool` when one is configured: one
  copy, from the source tensor (any strides, any device) into the segment.

Ownership rule (same as an in-process handoff by reference): do not modify
a tensor in place after handing it to ``encode``/``send``; inline frames
reference its memory until ZeroMQ has written them.

Devices: CUDA (or any non-CPU) tensors are moved to the CPU for the wire; the
*receiver* chooses the device with ``decode(..., device="cuda:0")``. The
sender's device is not carried, because device numbering is per process
(``CUDA_VISIBLE_DEVICES``).

Decoding validates everything (magic, version, extension tags, dtype
names, shapes against byte lengths, indices, nesting depth, sizes) and raises
:class:`CodecError` on any mismatch. Inline tensors decode zero-copy over
the received ZeroMQ frame when it is writable (else from a private copy).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import torch

from .dtypes import DTYPE_BY_NAME, NAME_BY_DTYPE
from .errors import CodecError, TransportError
from .shm import RECEIVE_MODES, ShmLease, ShmPool, ShmReader, ShmRef

__all__ = ["Codec", "CodecLimits", "Encoded", "decode", "discard", "encode"]

_MAGIC = "omni"
_VERSION = 1
_EXT_TUPLE = 1
_EXT_TENSOR = 2
_EXT_BYTES = 3
_TUPLE_MARK = msgspec.msgpack.Ext(_EXT_TUPLE, b"")
_WHERE_INLINE = 0
_WHERE_SHM = 1
_WHERE_CHUNKED = 2
"""A large tensor split into consecutive buffer frames (``index`` is the first); see ``chunk_bytes``."""

_INT_MIN = -(1 << 63)
_INT_MAX = (1 << 64) - 1
_DECODED_SCALARS = frozenset({str, int, float, bool, bytes, type(None)})
"""Types MessagePack decodes to that ``_dec`` returns unchanged."""

DEFAULT_SHM_THRESHOLD = 1 << 20
DEFAULT_INLINE_BYTES_MAX = 64 << 10


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


class _TensorRef:
    __slots__ = ("dtype", "index", "shape", "where")

    def __init__(self, dtype: torch.dtype, shape: tuple[int, ...], where: int, index: int) -> None:
        self.dtype = dtype
        self.shape = shape
        self.where = where
        self.index = index


class _BytesRef:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class _TupleMark:
    __slots__ = ()


_TUPLE_SENTINEL = _TupleMark()
_small_decoder = msgspec.msgpack.Decoder()
_encoder = msgspec.msgpack.Encoder()


def _tensor_ext_payload(dtype_name: str, shape: Sequence[int], where: int, index: int) -> bytes:
    return _encoder.encode([dtype_name, list(shape), where, index])


def _ext_hook(code: int, data: memoryview) -> Any:
    if code == _EXT_TUPLE:
        if len(data):
            raise CodecError("malformed message: tuple marker carries data")
        return _TUPLE_SENTINEL
    if code == _EXT_TENSOR:
        try:
            meta = _small_decoder.decode(data)
        except (msgspec.DecodeError, RecursionError) as exc:
            raise CodecError(f"malformed tensor header: {exc}") from None
        if not (isinstance(meta, list) and len(meta) == 4):
            raise CodecError("malformed tensor header: expected [dtype, shape, where, index]")
        name, shape, where, index = meta
        dtype = DTYPE_BY_NAME.get(name) if isinstance(name, str) else None
        if dtype is None:
            raise CodecError(
                f"unknown tensor dtype {name!r} in message; this torch supports {sorted(DTYPE_BY_NAME)} (sender and receiver torch versions differ?)"
            )
        if not isinstance(shape, list) or not all(type(d) is int and 0 <= d < (1 << 62) for d in shape):
            raise CodecError(f"malformed tensor shape {shape!r} in message")
        if where not in (_WHERE_INLINE, _WHERE_SHM, _WHERE_CHUNKED) or type(index) is not int or index < 0:
            raise CodecError(f"malformed tensor location {where!r}/{index!r} in message")
        return _TensorRef(dtype, tuple(shape), where, index)
    if code == _EXT_BYTES:
        try:
            index = _small_decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise CodecError(f"malformed bytes reference: {exc}") from None
        if type(index) is not int or index < 0:
            raise CodecError(f"malformed bytes reference {index!r} in message")
        return _BytesRef(index)
    raise CodecError(f"unknown type tag {code} in message (this codec knows 1=tuple, 2=tensor, 3=bytes)")


_body_decoder = msgspec.msgpack.Decoder(ext_hook=_ext_hook)


def _path_str(path: list) -> str:
    out = "value"
    for p in path:
        out += f"[{p!r}]"
    return out


@dataclass
class Encoded:
    """Frames of one encoded value plus the shared-memory leases they use.

    ``frames[0]`` is the body; the rest are buffers (memoryviews). Exactly
    one of :meth:`mark_sent` (frames were queued for sending) or
    :meth:`release` (they never will be) must be called when ``leases`` is
    non-empty; the channels do this for you.
    """

    frames: list[Any]
    leases: list[ShmLease] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        """Bytes on the socket (frames), not counting shared memory."""
        return sum(memoryview(f).nbytes for f in self.frames)

    def mark_sent(self) -> None:
        for lease in self.leases:
            lease.mark_sent()
        self.leases = []

    def release(self) -> None:
        for lease in self.leases:
            lease.cancel()
        self.leases = []


class _EncodeState:
    __slots__ = ("buffers", "inline_only", "leases", "refs")

    def __init__(self) -> None:
        self.buffers: list[Any] = []
        self.refs: list[list] = []
        self.leases: list[ShmLease] = []
        self.inline_only = False


class _ShmNeeded(Exception):
    """Raised inside :meth:`Codec.encode_inline` at the first tensor that needs shared memory."""


class Codec:
    """Encoder/decoder with its shared-memory configuration.

    Sender side: ``Codec(pool=ShmPool(prefix), shm_threshold=1 << 20)``;
    without a pool every tensor travels inline. Receiver side: ``reader``
    resolves shared-memory references (a default :class:`ShmReader` is
    made on first use); ``shm_mode`` is the default receive mode for
    shared-memory tensors: ``"copy"`` (the default: copy out, release at
    once, the sender reuses its warm segment; no lifetime coupling at all),
    ``"view"`` (zero-copy over a reused segment; pins the sender's budget
    while the tensor lives: for data consumed and dropped soon) or
    ``"adopt"`` (zero-copy, the receiver takes the memory over and the
    sender's budget is freed at once, at the price of a fresh segment per
    message); see :mod:`.shm`. One codec per
    process is the intended use; it is thread-safe.
    """

    def __init__(
        self,
        *,
        pool: ShmPool | None = None,
        reader: ShmReader | None = None,
        shm_threshold: int = DEFAULT_SHM_THRESHOLD,
        inline_bytes_max: int = DEFAULT_INLINE_BYTES_MAX,
        limits: CodecLimits = CodecLimits(),
        shm_timeout: float | None = None,
        shm_mode: str = "copy",
        chunk_bytes: int | None = None,
    ) -> None:
        if shm_threshold < 1:
            raise ValueError(f"shm_threshold={shm_threshold} must be >= 1 byte")
        if chunk_bytes is not None and chunk_bytes < 1:
            raise ValueError(f"chunk_bytes={chunk_bytes} must be >= 1 byte")
        self.chunk_bytes = chunk_bytes
        self.pool = pool
        self.reader = reader
        self.shm_threshold = int(shm_threshold)
        self.inline_bytes_max = int(inline_bytes_max)
        self.limits = limits
        self.shm_timeout = shm_timeout
        if shm_mode not in RECEIVE_MODES:
            raise ValueError(f"shm_mode={shm_mode!r} must be one of {RECEIVE_MODES}")
        self.shm_mode = shm_mode

    # -- encode ----------------------------------------------------------------------

    def encode(self, obj: Any, *, shm_timeout: float | None = None) -> Encoded:
        """Encode ``obj``; raises :class:`CodecError` for unsupported values.

        May block on the shared-memory budget (back-pressure) and raise
        :class:`~omni_runtime.transport.errors.ShmTimeoutError`. On any error
        every lease taken so far is given back.
        """
        return self._encode(obj, _EncodeState(), self.shm_timeout if shm_timeout is None else shm_timeout)

    def encode_inline(self, obj: Any) -> Encoded | None:
        """:meth:`encode` for a value with no tensor that goes through shared memory, else ``None``.

        The async channel encodes small payloads right on the event loop in
        this one walk and moves only the ones that copy into shared memory to
        a worker thread. A ``None`` took nothing (no lease, no copy).
        """
        st = _EncodeState()
        st.inline_only = True
        try:
            return self._encode(obj, st, None)
        except _ShmNeeded:
            return None

    def _encode(self, obj: Any, st: _EncodeState, timeout: float | None) -> Encoded:
        try:
            tree = self._enc(obj, st, [], 0, timeout)
            try:
                body = _encoder.encode([_MAGIC, _VERSION, st.refs, tree])
            except (OverflowError, UnicodeEncodeError, TypeError, ValueError) as exc:
                raise CodecError(f"cannot encode value: {exc}") from None
            except RecursionError:
                raise CodecError(f"value nests deeper than {self.limits.max_depth} levels") from None
            if len(body) > self.limits.max_body_bytes:
                raise CodecError(
                    f"encoded body is {len(body)} bytes, over the {self.limits.max_body_bytes}-byte limit; "
                    "put large data in tensors or bytes (sent out of line)"
                )
        except BaseException:
            for lease in st.leases:
                lease.cancel()
            raise
        return Encoded([body, *st.buffers], st.leases)

    def _enc(self, x: Any, st: _EncodeState, path: list, depth: int, timeout: float | None) -> Any:
        t = type(x)
        if t is str or t is float or t is bool or x is None:
            return x
        if t is int:
            if not _INT_MIN <= x <= _INT_MAX:
                raise CodecError(f"{_path_str(path)}: integer {x} is outside int64/uint64 [{_INT_MIN}, {_INT_MAX}]; send it as a str or a tensor")
            return x
        if depth >= self.limits.max_depth:
            raise CodecError(f"{_path_str(path)}: value nests deeper than {self.limits.max_depth} levels")
        # Scalar members are checked right here, without a call per member: payloads and
        # headers are mostly scalars, and a call per value was most of a small message's cost.
        if t is dict:
            out = {}
            for k, v in x.items():
                if type(k) is not str:
                    raise CodecError(f"{_path_str(path)}: dict key {k!r} is a {type(k).__name__}; only str keys are supported (convert keys with str())")
                tv = type(v)
                if tv is str or tv is float or tv is bool or v is None or (tv is int and _INT_MIN <= v <= _INT_MAX):
                    out[k] = v
                    continue
                path.append(k)
                out[k] = self._enc(v, st, path, depth + 1, timeout)
                path.pop()
            return out
        if t is list or t is tuple:
            out_l = [_TUPLE_MARK] if t is tuple else []
            for i, v in enumerate(x):
                tv = type(v)
                if tv is str or tv is float or tv is bool or v is None or (tv is int and _INT_MIN <= v <= _INT_MAX):
                    out_l.append(v)
                    continue
                path.append(i)
                out_l.append(self._enc(v, st, path, depth + 1, timeout))
                path.pop()
            return out_l
        if t is bytes:
            if len(x) >= self.inline_bytes_max:
                self._check_buffer(len(x), st, path)
                st.buffers.append(x)
                return msgspec.msgpack.Ext(_EXT_BYTES, _encoder.encode(len(st.buffers) - 1))
            return x
        if isinstance(x, torch.Tensor):
            return self._enc_tensor(x, st, path, timeout)
        # Subclasses of plain types (IntEnum, numpy.float64, str enums) carry
        # their plain value; the subclass itself is not preserved.
        if isinstance(x, bool):
            return bool(x)
        if isinstance(x, int):
            return self._enc(int(x), st, path, depth, timeout)
        if isinstance(x, float):
            return float(x)
        if isinstance(x, str):
            return str(x)
        hint = ""
        if t is bytearray or t is memoryview:
            hint = " (convert it with bytes(...))"
        elif t.__module__ == "numpy" or t.__name__ == "ndarray":
            hint = " (convert it with torch.from_numpy(...))"
        elif isinstance(x, (set, frozenset)):
            hint = " (convert it to a sorted list)"
        raise CodecError(
            f"{_path_str(path)}: type {t.__module__}.{t.__qualname__} cannot be sent across processes{hint}; "
            "payloads may hold dict (str keys), list, tuple, str, int, float, bool, None, bytes and torch.Tensor"
        )

    def _check_buffer(self, nbytes: int, st: _EncodeState, path: list) -> None:
        if len(st.buffers) >= self.limits.max_buffers:
            raise CodecError(f"{_path_str(path)}: more than {self.limits.max_buffers} out-of-line buffers in one message")
        if nbytes > self.limits.max_buffer_bytes:
            raise CodecError(
                f"{_path_str(path)}: {nbytes} bytes inline exceeds the {self.limits.max_buffer_bytes}-byte frame "
                "limit; configure a shared-memory pool for large tensors"
            )

    def _enc_tensor(self, x: torch.Tensor, st: _EncodeState, path: list, timeout: float | None) -> Any:
        name = NAME_BY_DTYPE.get(x.dtype)
        if name is None:
            raise CodecError(
                f"{_path_str(path)}: tensor dtype {x.dtype} is not supported on the wire "
                f"(supported: {', '.join(sorted(NAME_BY_DTYPE.values()))}); quantized tensors: send "
                "int_repr() plus scale and zero point"
            )
        if x.layout != torch.strided:
            raise CodecError(f"{_path_str(path)}: {x.layout} tensors are not supported; call .to_dense() first")
        if x.is_meta:
            raise CodecError(f"{_path_str(path)}: meta tensors have no data to send")
        if x.dim() > self.limits.max_ndim:
            raise CodecError(f"{_path_str(path)}: tensor has {x.dim()} dims, over the limit of {self.limits.max_ndim}")
        if x.requires_grad:
            x = x.detach()
        if x.is_conj():
            x = x.resolve_conj()
        if x.is_neg():
            x = x.resolve_neg()
        shape = list(x.shape)
        nbytes = x.nbytes
        if self.pool is not None and nbytes >= self.shm_threshold and nbytes > 0:
            if st.inline_only:
                raise _ShmNeeded
            lease = self.pool.acquire(nbytes, timeout=timeout)
            st.leases.append(lease)
            # One copy, straight from the source (any strides or device) into
            # the segment; no intermediate contiguous/CPU tensor.
            lease.view.view(x.dtype).view(x.shape).copy_(x)
            if len(st.refs) >= self.limits.max_shm_refs:
                raise CodecError(f"{_path_str(path)}: more than {self.limits.max_shm_refs} shared-memory tensors in one message")
            st.refs.append([lease.ref.name, lease.ref.gen, lease.ref.nbytes])
            return msgspec.msgpack.Ext(_EXT_TENSOR, _tensor_ext_payload(name, shape, _WHERE_SHM, len(st.refs) - 1))
        if not x.is_cpu:
            x = x.cpu()
        if not x.is_contiguous():
            x = x.contiguous()
        chunk = self.chunk_bytes
        if chunk is not None and nbytes > chunk:  # no frame larger than chunk_bytes (a TCP hop between nodes)
            whole = memoryview(_tensor_bytes(x)).cast("B")
            first = len(st.buffers)
            for start in range(0, nbytes, chunk):
                self._check_buffer(min(chunk, nbytes - start), st, path)
                st.buffers.append(whole[start : start + chunk])
            return msgspec.msgpack.Ext(_EXT_TENSOR, _tensor_ext_payload(name, shape, _WHERE_CHUNKED, first))
        self._check_buffer(nbytes, st, path)
        st.buffers.append(_tensor_bytes(x))
        return msgspec.msgpack.Ext(_EXT_TENSOR, _tensor_ext_payload(name, shape, _WHERE_INLINE, len(st.buffers) - 1))

    # -- decode ----------------------------------------------------------------------

    def decode(self, frames: Sequence[Any], *, device: str | torch.device | None = None, shm_mode: str | None = None) -> Any:
        """Decode frames produced by :meth:`encode` (``zmq.Frame``, bytes or memoryviews).

        ``device``: move tensors there (``None`` keeps them on the CPU).
        ``shm_mode``: ``"adopt"``, ``"copy"`` or ``"view"`` for tensors in
        shared memory (see :mod:`.shm`); ``None`` uses the codec's
        ``shm_mode``.
        Raises :class:`CodecError` on malformed input; shared-memory
        references of a message that fails to decode are released.
        """
        if shm_mode is None:
            shm_mode = self.shm_mode
        elif shm_mode not in RECEIVE_MODES:
            raise ValueError(f"shm_mode={shm_mode!r} must be one of {RECEIVE_MODES}")
        bufs, refs, tree = self._parse(frames)
        used_bufs: set[int] = set()
        used_refs: set[int] = set()
        try:
            value = self._dec(tree, bufs, refs, used_bufs, used_refs, 0, device, shm_mode)
            if len(used_bufs) != len(bufs):
                raise CodecError(f"malformed message: {len(bufs) - len(used_bufs)} unreferenced buffer frame(s)")
            if len(used_refs) != len(refs):
                raise CodecError("malformed message: unreferenced shared-memory segment(s)")
        except BaseException:
            self._release_refs(refs, skip=used_refs)
            raise
        return value

    def discard(self, frames: Sequence[Any]) -> None:
        """Release the shared memory of a message that will not be decoded.

        Call this for every dropped message (aborted request, unknown
        destination); otherwise its segments stay pinned until the sender's
        claim timeout. Malformed frames are ignored.
        """
        try:
            _, refs, _ = self._parse(frames)
        except CodecError:
            return
        self._release_refs(refs, skip=set())

    def _get_reader(self) -> ShmReader:
        if self.reader is None:
            self.reader = ShmReader()
        return self.reader

    def _release_refs(self, refs: list[ShmRef], skip: set[int]) -> None:
        if not refs:
            return
        reader = self._get_reader()
        for i, ref in enumerate(refs):
            if i not in skip:
                try:
                    reader.release(ref)
                except TransportError:
                    pass

    def _parse(self, frames: Sequence[Any]) -> tuple[list[memoryview], list[ShmRef], Any]:
        if not isinstance(frames, (list, tuple)) or not frames:
            raise CodecError("malformed message: no frames")
        if len(frames) - 1 > self.limits.max_buffers:
            raise CodecError(f"malformed message: {len(frames) - 1} buffer frames, over the limit of {self.limits.max_buffers}")
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
        if body.nbytes > self.limits.max_body_bytes:
            raise CodecError(f"message body of {body.nbytes} bytes exceeds the {self.limits.max_body_bytes}-byte limit")
        for mv in views[1:]:
            if mv.nbytes > self.limits.max_buffer_bytes:
                raise CodecError(f"buffer frame of {mv.nbytes} bytes exceeds the {self.limits.max_buffer_bytes}-byte limit")
        try:
            outer = _body_decoder.decode(body)
        except msgspec.DecodeError as exc:
            raise CodecError(f"malformed message body: {exc}") from None
        except RecursionError:
            raise CodecError("malformed message body: nesting too deep") from None
        if not (isinstance(outer, list) and len(outer) == 4 and outer[0] == _MAGIC):
            raise CodecError("malformed message body: not an omni codec message (bad magic)")
        if outer[1] != _VERSION:
            raise CodecError(f"unsupported codec version {outer[1]!r} (this side speaks {_VERSION})")
        raw_refs = outer[2]
        if not isinstance(raw_refs, list) or len(raw_refs) > self.limits.max_shm_refs:
            raise CodecError("malformed message body: bad shared-memory reference table")
        refs = []
        for r in raw_refs:
            if not (
                isinstance(r, list) and len(r) == 3 and type(r[0]) is str and type(r[1]) is int and type(r[2]) is int and 0 <= r[2] <= self.limits.max_shm_bytes
            ):
                raise CodecError(f"malformed shared-memory reference {r!r}")
            refs.append(ShmRef(r[0], r[1], r[2]))
        return views[1:], refs, outer[3]

    def _dec(self, x, bufs, refs, used_bufs, used_refs, depth, device, shm_mode) -> Any:
        t = type(x)
        if t is str or t is int or t is float or t is bool or x is None or t is bytes:
            return x
        if depth >= self.limits.max_depth:
            raise CodecError(f"malformed message: nesting deeper than {self.limits.max_depth}")
        # Scalar members pass through here without a call each (see _enc).
        if t is list:
            if x and type(x[0]) is _TupleMark:
                return tuple(
                    v if type(v) in _DECODED_SCALARS else self._dec(v, bufs, refs, used_bufs, used_refs, depth + 1, device, shm_mode) for v in x[1:]
                )
            return [v if type(v) in _DECODED_SCALARS else self._dec(v, bufs, refs, used_bufs, used_refs, depth + 1, device, shm_mode) for v in x]
        if t is dict:
            out = {}
            for k, v in x.items():
                if type(k) is not str:
                    raise CodecError(f"malformed message: dict key {k!r} is not a str")
                out[k] = v if type(v) in _DECODED_SCALARS else self._dec(v, bufs, refs, used_bufs, used_refs, depth + 1, device, shm_mode)
            return out
        if t is _TensorRef:
            tensor = self._dec_tensor(x, bufs, refs, used_bufs, used_refs, shm_mode)
            if device is not None:
                tensor = tensor.to(device)
            return tensor
        if t is _BytesRef:
            if x.index >= len(bufs) or x.index in used_bufs:
                raise CodecError(f"malformed message: bytes reference {x.index} is out of range or reused")
            used_bufs.add(x.index)
            return bytes(bufs[x.index])
        if t is _TupleMark:
            raise CodecError("malformed message: tuple marker outside the first array slot")
        raise CodecError(f"malformed message: unexpected {t.__name__} value")

    def _dec_tensor(self, ref: _TensorRef, bufs, refs, used_bufs, used_refs, shm_mode) -> torch.Tensor:
        if len(ref.shape) > self.limits.max_ndim:
            raise CodecError(f"malformed message: tensor rank {len(ref.shape)} over the limit of {self.limits.max_ndim}")
        nbytes = math.prod(ref.shape) * ref.dtype.itemsize
        if ref.where == _WHERE_CHUNKED:
            return _join_chunks(ref, nbytes, bufs, used_bufs)
        if ref.where == _WHERE_INLINE:
            if ref.index >= len(bufs) or ref.index in used_bufs:
                raise CodecError(f"malformed message: tensor buffer {ref.index} is out of range or reused")
            used_bufs.add(ref.index)
            buf = bufs[ref.index]
            if buf.nbytes != nbytes:
                raise CodecError(f"malformed message: tensor {ref.dtype} {list(ref.shape)} needs {nbytes} bytes, frame has {buf.nbytes}")
            if nbytes == 0:
                return torch.empty(ref.shape, dtype=ref.dtype)
            if buf.readonly:
                buf = bytearray(buf)  # never hand out a tensor over immutable memory
            flat = torch.frombuffer(buf, dtype=ref.dtype)
            return flat if len(ref.shape) == 1 else flat.view(ref.shape)
        else:
            if ref.index >= len(refs) or ref.index in used_refs:
                raise CodecError(f"malformed message: shared-memory reference {ref.index} is out of range or reused")
            used_refs.add(ref.index)
            shm_ref = refs[ref.index]
            if shm_ref.nbytes != nbytes:
                raise CodecError(f"malformed message: tensor {ref.dtype} {list(ref.shape)} needs {nbytes} bytes, segment reference has {shm_ref.nbytes}")
            flat = self._get_reader().read(shm_ref, mode=shm_mode)
            if nbytes == 0:
                return torch.empty(ref.shape, dtype=ref.dtype)
            return flat.view(ref.dtype).view(ref.shape)


def _join_chunks(ref: _TensorRef, nbytes: int, bufs: list[memoryview], used_bufs: set[int]) -> torch.Tensor:
    """Copy the consecutive frames of a chunked tensor into one new tensor (frames must add up exactly)."""
    out = torch.empty(nbytes, dtype=torch.uint8)
    flat = out.numpy()
    filled = 0
    index = ref.index
    while filled < nbytes:
        if index >= len(bufs) or index in used_bufs:
            raise CodecError(f"malformed message: chunked tensor needs {nbytes} bytes, frames end after {filled}")
        used_bufs.add(index)
        part = bufs[index]
        if part.nbytes == 0 or filled + part.nbytes > nbytes:
            raise CodecError(f"malformed message: chunk {index} of {part.nbytes} bytes does not fit a {nbytes}-byte tensor")
        flat[filled : filled + part.nbytes] = part
        filled += part.nbytes
        index += 1
    return out.view(ref.dtype).view(ref.shape) if nbytes else torch.empty(ref.shape, dtype=ref.dtype)


def _tensor_bytes(x: torch.Tensor) -> memoryview | bytes:
    """Zero-copy byte view of a contiguous CPU tensor (keeps it alive)."""
    if x.numel() == 0:
        return b""
    if x.dim() != 1:
        x = x.reshape(-1)
    if x.dtype in _NUMPY_DTYPES:
        return memoryview(x.numpy())  # cheaper than a torch uint8 view
    return memoryview(x.view(torch.uint8).numpy())


# dtypes numpy can wrap directly (others, e.g. bfloat16, go through a uint8 view).
_NUMPY_DTYPES = frozenset(
    getattr(torch, n)
    for n in ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float16", "float32", "float64", "complex64", "complex128")
    if hasattr(torch, n)
)


_default = Codec()


def encode(obj: Any) -> Encoded:
    """Encode with a default codec (no shared memory: every tensor inline)."""
    return _default.encode(obj)


def decode(frames: Sequence[Any], *, device: str | torch.device | None = None) -> Any:
    """Decode frames with a default codec (resolves shared memory too)."""
    return _default.decode(frames, device=device)


def discard(frames: Iterable[Any]) -> None:
    """Release shared memory referenced by frames that will not be decoded."""
    _default.discard(list(frames))


_HEADER_MAGIC = "omni-msg"


def encode_envelope(header: dict[str, Any], shm_count: int = 0) -> bytes:
    """Encode a message header: a small dict of plain values (no tensors).

    The envelope also says how many shared-memory tensors the payload holds,
    so a receiver can decide to decode off its event loop, or drop the
    message, without parsing the payload.
    """
    if type(header) is not dict:
        raise CodecError(f"message header must be a dict with str keys, got {type(header).__name__}")
    st = _EncodeState()
    tree = _default._enc(header, st, ["header"], 0, None)
    if st.buffers or st.refs:
        raise CodecError("message header may not hold tensors or bytes over 64 KiB; put them in the payload")
    try:
        return _encoder.encode([_HEADER_MAGIC, _VERSION, tree, shm_count])
    except (OverflowError, UnicodeEncodeError, TypeError, ValueError) as exc:
        raise CodecError(f"cannot encode message header: {exc}") from None


def decode_envelope(frame: Any, *, max_bytes: int = 1 << 20) -> tuple[dict[str, Any], int]:
    """Decode an envelope frame into ``(header, shm_count)``; :class:`CodecError` if malformed."""
    try:
        mv = memoryview(frame)
    except TypeError:
        raise CodecError(f"malformed message header: frame of type {type(frame).__name__} is not a buffer") from None
    if mv.nbytes > max_bytes:
        raise CodecError(f"message header of {mv.nbytes} bytes exceeds the {max_bytes}-byte limit")
    try:
        outer = _body_decoder.decode(mv)
    except msgspec.DecodeError as exc:
        raise CodecError(f"malformed message header: {exc}") from None
    except RecursionError:
        raise CodecError("malformed message header: nesting too deep") from None
    if not (isinstance(outer, list) and len(outer) == 4 and outer[0] == _HEADER_MAGIC):
        raise CodecError("malformed message header: not an omni message (bad magic)")
    if outer[1] != _VERSION:
        raise CodecError(f"unsupported message version {outer[1]!r} (this side speaks {_VERSION})")
    if type(outer[3]) is not int or outer[3] < 0:
        raise CodecError("malformed message header: bad shared-memory count")
    header = _default._dec(outer[2], [], [], set(), set(), 0, None, True)
    if type(header) is not dict:
        raise CodecError("malformed message header: not a dict")
    return header, outer[3]
