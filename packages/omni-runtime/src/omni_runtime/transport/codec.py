"""Typed, pickle-free codec for stage payloads.

Supported values (the stage contract's "codec types"): ``dict`` with ``str``
keys, ``list``, ``tuple`` (decodes as a tuple), ``str``, ``int`` (within
int64/uint64), ``float``, ``bool``, ``None``, ``bytes``, ``torch.Tensor``
of every dtype in :data:`~omni_runtime.transport.dtypes.SUPPORTED_DTYPES`
(bfloat16, bool, complex, float8 ... ) and ``numpy.ndarray`` of the numeric
dtypes numpy shares with torch, any shape, 0-d and empty included. A numpy
array and a torch tensor of the same dtype and values are the same bytes on
the wire; the receiver decides what it decodes into (``Codec(arrays=...)``,
:mod:`.arrays`). Type checks look torch and numpy up in ``sys.modules``, so
encoding never imports torch: a process that never loaded it (the parent)
cannot be holding a tensor.
Anything else raises :class:`CodecError` naming the path inside the value
(``data["voice"]["emb"][1]``) and the fix. There is no pickle fallback, by
design: a payload must be data, not code.

``encode`` returns frames ``[body, *buffers]`` (the body's format: :mod:`.wire`):

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

Decoding (:mod:`.decoding`) validates everything and raises
:class:`CodecError` on any mismatch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .arrays import array_backend, numpy_wire_name, tensor_bytes
from .decoding import DecodeWalk, parse
from .dtypes import NUMPY_NAMES, torch_tables
from .errors import CodecError, TransportError
from .shm import ShmLease, ShmPool, ShmReader, ShmRef
from .wire import (
    DEFAULT_LIMITS,
    EXT_BYTES,
    EXT_TENSOR,
    INT_MAX,
    INT_MIN,
    MAGIC,
    TUPLE_MARK,
    VERSION,
    WHERE_CHUNKED,
    WHERE_INLINE,
    WHERE_SHM,
    CodecLimits,
    encoder,
    path_str,
    tensor_ext_payload,
)

__all__ = ["Codec", "CodecLimits", "Encoded", "decode", "discard", "encode"]

DEFAULT_SHM_THRESHOLD = 1 << 20
DEFAULT_INLINE_BYTES_MAX = 64 << 10


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

    def mark_sent(self, peer: str | None = None) -> None:
        for lease in self.leases:
            lease.mark_sent(peer)
        self.leases = []

    def release(self) -> None:
        for lease in self.leases:
            lease.cancel()
        self.leases = []


class EncodeState:
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
    resolves shared-memory references (a default :class:`ShmReader` is made
    on first use) by copying the bytes out and releasing the segment at once;
    ``arrays`` says what tensors decode into: ``"torch"`` tensors (the
    default, what stage code takes) or ``"numpy"`` arrays (the parent, which
    never loads torch). One codec per process is the intended use; it is
    thread-safe.
    """

    def __init__(
        self,
        *,
        pool: ShmPool | None = None,
        reader: ShmReader | None = None,
        shm_threshold: int = DEFAULT_SHM_THRESHOLD,
        inline_bytes_max: int = DEFAULT_INLINE_BYTES_MAX,
        limits: CodecLimits = DEFAULT_LIMITS,
        shm_timeout: float | None = None,
        chunk_bytes: int | None = None,
        arrays: str = "torch",
    ) -> None:
        if arrays not in ("torch", "numpy"):
            raise ValueError(f"arrays={arrays!r}: must be 'torch' or 'numpy'")
        self.arrays = arrays
        self._arrays: Any = None  # the backend, made on first decode (the torch one imports torch)
        if shm_threshold < 1:
            raise ValueError(f"shm_threshold={shm_threshold} must be >= 1 byte")
        if chunk_bytes is not None and chunk_bytes < 1:
            raise ValueError(f"chunk_bytes={chunk_bytes} must be >= 1 byte")
        self.chunk_bytes = chunk_bytes
        """Largest frame an inline tensor is split into (a TCP hop between nodes); None: one frame per tensor."""
        self.pool = pool
        self.reader = reader
        self.shm_threshold = int(shm_threshold)
        self.inline_bytes_max = int(inline_bytes_max)
        self.limits = limits
        self.shm_timeout = shm_timeout

    # -- encode ----------------------------------------------------------------------

    def encode(self, obj: Any, *, shm_timeout: float | None = None) -> Encoded:
        """Encode ``obj``; raises :class:`CodecError` for unsupported values.

        May block on the shared-memory budget (back-pressure) and raise
        :class:`~omni_runtime.transport.errors.ShmTimeoutError`. On any error
        every lease taken so far is given back.
        """
        return self._encode(obj, EncodeState(), self.shm_timeout if shm_timeout is None else shm_timeout)

    def encode_inline(self, obj: Any) -> Encoded | None:
        """:meth:`encode` for a value with no tensor that goes through shared memory, else ``None``.

        The async channel encodes small payloads right on the event loop in
        this one walk and moves only the ones that copy into shared memory to
        a worker thread. A ``None`` took nothing (no lease, no copy).
        """
        st = EncodeState()
        st.inline_only = True
        try:
            return self._encode(obj, st, None)
        except _ShmNeeded:
            return None

    def encode_tree(self, obj: Any, st: EncodeState, path: list) -> Any:
        """The MessagePack tree of ``obj`` (what the envelope encodes a header with); out-of-line parts land in ``st``."""
        return self._enc(obj, st, path, 0, None)

    def _encode(self, obj: Any, st: EncodeState, timeout: float | None) -> Encoded:
        try:
            tree = self._enc(obj, st, [], 0, timeout)
            try:
                body = encoder.encode([MAGIC, VERSION, st.refs, tree])
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

    def _enc(self, x: Any, st: EncodeState, path: list, depth: int, timeout: float | None) -> Any:
        t = type(x)
        if t is str or t is float or t is bool or x is None:
            return x
        if t is int:
            if not INT_MIN <= x <= INT_MAX:
                raise CodecError(f"{path_str(path)}: integer {x} is outside int64/uint64 [{INT_MIN}, {INT_MAX}]; send it as a str or a tensor")
            return x
        if depth >= self.limits.max_depth:
            raise CodecError(f"{path_str(path)}: value nests deeper than {self.limits.max_depth} levels")
        # Scalar members are checked right here, without a call per member: payloads and
        # headers are mostly scalars, and a call per value was most of a small message's cost.
        if t is dict:
            out = {}
            for k, v in x.items():
                if type(k) is not str:
                    raise CodecError(f"{path_str(path)}: dict key {k!r} is a {type(k).__name__}; only str keys are supported (convert keys with str())")
                tv = type(v)
                if tv is str or tv is float or tv is bool or v is None or (tv is int and INT_MIN <= v <= INT_MAX):
                    out[k] = v
                    continue
                path.append(k)
                out[k] = self._enc(v, st, path, depth + 1, timeout)
                path.pop()
            return out
        if t is list or t is tuple:
            out_l = [TUPLE_MARK] if t is tuple else []
            for i, v in enumerate(x):
                tv = type(v)
                if tv is str or tv is float or tv is bool or v is None or (tv is int and INT_MIN <= v <= INT_MAX):
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
                return msgspec.msgpack.Ext(EXT_BYTES, encoder.encode(len(st.buffers) - 1))
            return x
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, torch.Tensor):
            return self._enc_tensor(torch, x, st, path, timeout)
        np = sys.modules.get("numpy")
        if np is not None and isinstance(x, np.ndarray):
            return self._enc_ndarray(x, st, path, timeout)
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
        elif t.__module__ == "numpy":
            hint = " (convert a numpy scalar with .item(), or send a numpy.ndarray)"
        elif isinstance(x, (set, frozenset)):
            hint = " (convert it to a sorted list)"
        raise CodecError(
            f"{path_str(path)}: type {t.__module__}.{t.__qualname__} cannot be sent across processes{hint}; "
            "payloads may hold dict (str keys), list, tuple, str, int, float, bool, None, bytes, torch.Tensor and numpy.ndarray"
        )

    def _check_buffer(self, nbytes: int, st: EncodeState, path: list) -> None:
        if len(st.buffers) >= self.limits.max_buffers:
            raise CodecError(f"{path_str(path)}: more than {self.limits.max_buffers} out-of-line buffers in one message")
        if nbytes > self.limits.max_buffer_bytes:
            raise CodecError(
                f"{path_str(path)}: {nbytes} bytes inline exceeds the {self.limits.max_buffer_bytes}-byte frame "
                "limit; configure a shared-memory pool for large tensors"
            )

    def _enc_tensor(self, torch: Any, x: Any, st: EncodeState, path: list, timeout: float | None) -> Any:
        name_by_dtype = torch_tables()[1]
        name = name_by_dtype.get(x.dtype)
        if name is None:
            raise CodecError(
                f"{path_str(path)}: tensor dtype {x.dtype} is not supported on the wire "
                f"(supported: {', '.join(sorted(name_by_dtype.values()))}); quantized tensors: send "
                "int_repr() plus scale and zero point"
            )
        if x.layout != torch.strided:
            raise CodecError(f"{path_str(path)}: {x.layout} tensors are not supported; call .to_dense() first")
        if x.is_meta:
            raise CodecError(f"{path_str(path)}: meta tensors have no data to send")
        if x.dim() > self.limits.max_ndim:
            raise CodecError(f"{path_str(path)}: tensor has {x.dim()} dims, over the limit of {self.limits.max_ndim}")
        if x.requires_grad:
            x = x.detach()
        if x.is_conj():
            x = x.resolve_conj()
        if x.is_neg():
            x = x.resolve_neg()
        def fill(lease: ShmLease) -> None:
            # One copy, straight from the source (any strides or device) into
            # the segment; no intermediate contiguous/CPU tensor.
            lease.view.view(x.dtype).view(x.shape).copy_(x)

        def raw() -> memoryview:
            y = x if x.is_cpu else x.cpu()
            return memoryview(tensor_bytes(torch, y if y.is_contiguous() else y.contiguous(), name)).cast("B")

        return self._place(name, list(x.shape), x.nbytes, st, path, timeout, fill, raw)

    def _enc_ndarray(self, x: Any, st: EncodeState, path: list, timeout: float | None) -> Any:
        """A numpy array: the same wire form as a torch tensor of that dtype (the parent sends e.g. decoded reference audio)."""
        import numpy as np  # already loaded: x is an array

        name = numpy_wire_name(x)
        if name is None:
            raise CodecError(
                f"{path_str(path)}: numpy dtype {x.dtype} is not supported on the wire "
                f"(supported: {', '.join(sorted(NUMPY_NAMES))}); convert it with .astype(...)"
            )
        if x.ndim > self.limits.max_ndim:
            raise CodecError(f"{path_str(path)}: array has {x.ndim} dims, over the limit of {self.limits.max_ndim}")
        if not x.dtype.isnative:
            x = x.astype(x.dtype.newbyteorder("="))  # the wire is this host's byte order, as torch's
        def fill(lease: ShmLease) -> None:
            np.copyto(lease.array.view(x.dtype).reshape(x.shape), x)  # one copy, any strides

        def raw() -> memoryview:
            return memoryview(np.ascontiguousarray(x).reshape(-1).view(np.uint8))

        return self._place(name, list(x.shape), x.nbytes, st, path, timeout, fill, raw)

    def _place(
        self, name: str, shape: list[int], nbytes: int, st: EncodeState, path: list, timeout: float | None,
        fill: Callable[[ShmLease], None], raw: Callable[[], memoryview],
    ) -> Any:
        """Where an array's bytes travel: a shared-memory segment of the pool (``fill`` copies them in) at
        ``shm_threshold`` bytes or more, else out-of-line frames of ``raw()`` (its bytes), cut at ``chunk_bytes``."""
        if self.pool is not None and nbytes >= self.shm_threshold and nbytes > 0:
            if st.inline_only:
                raise _ShmNeeded
            lease = self.pool.acquire(nbytes, timeout=timeout)
            st.leases.append(lease)
            fill(lease)
            if len(st.refs) >= self.limits.max_shm_refs:
                raise CodecError(f"{path_str(path)}: more than {self.limits.max_shm_refs} shared-memory tensors in one message")
            st.refs.append([lease.ref.name, lease.ref.gen, lease.ref.nbytes])
            return msgspec.msgpack.Ext(EXT_TENSOR, tensor_ext_payload(name, shape, WHERE_SHM, len(st.refs) - 1))
        whole = raw() if nbytes else b""
        chunk = self.chunk_bytes
        if chunk is not None and nbytes > chunk:  # no frame larger than chunk_bytes
            first = len(st.buffers)
            for start in range(0, nbytes, chunk):
                self._check_buffer(min(chunk, nbytes - start), st, path)
                st.buffers.append(whole[start : start + chunk])
            return msgspec.msgpack.Ext(EXT_TENSOR, tensor_ext_payload(name, shape, WHERE_CHUNKED, first))
        self._check_buffer(nbytes, st, path)
        st.buffers.append(whole)
        return msgspec.msgpack.Ext(EXT_TENSOR, tensor_ext_payload(name, shape, WHERE_INLINE, len(st.buffers) - 1))

    # -- decode ----------------------------------------------------------------------

    def decode(self, frames: Sequence[Any], *, device: Any = None) -> Any:
        """Decode frames produced by :meth:`encode` (``zmq.Frame``, bytes or memoryviews).

        Tensors become what ``arrays`` names. ``device``: move tensors there
        (``None`` keeps them on the CPU; torch arrays only). Raises
        :class:`CodecError` on malformed input; shared-memory references of
        a message that fails to decode are released.
        """
        bufs, refs, tree = parse(frames, self.limits)
        if self._arrays is None:
            self._arrays = array_backend(self.arrays)
        walk = DecodeWalk(bufs, refs, self.limits, device, self._get_reader().read_array if refs else None, self._arrays)
        try:
            value = walk.value(tree)
            walk.check_complete()
        except BaseException:
            self._release_refs(refs, skip=walk.used_refs)
            raise
        return value

    def discard(self, frames: Sequence[Any]) -> None:
        """Release the shared memory of a message that will not be decoded.

        Call this for every dropped message (aborted request, unknown
        destination); otherwise its segments stay pinned until the sender's
        claim timeout. Malformed frames are ignored.
        """
        try:
            _, refs, _ = parse(frames, self.limits)
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


DEFAULT_CODEC = Codec()


def encode(obj: Any) -> Encoded:
    """Encode with a default codec (no shared memory: every tensor inline)."""
    return DEFAULT_CODEC.encode(obj)


def decode(frames: Sequence[Any], *, device: Any = None) -> Any:
    """Decode frames with a default codec (resolves shared memory too)."""
    return DEFAULT_CODEC.decode(frames, device=device)


def discard(frames: Iterable[Any]) -> None:
    """Release shared memory referenced by frames that will not be decoded."""
    DEFAULT_CODEC.discard(list(frames))


