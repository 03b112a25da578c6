"""The envelope frame of every message: a small header dict and a shared-memory count.

The envelope says how many shared-memory tensors the payload holds, so a
receiver can decide to decode off its event loop, or drop the message,
without parsing the payload. Headers hold plain values only (no tensors, no
large bytes): the runtime routes on them before it decides to decode.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .codec import DEFAULT_CODEC, EncodeState
from .decoding import DecodeWalk
from .errors import CodecError
from .wire import DEFAULT_LIMITS, VERSION, body_decoder, encoder

_HEADER_MAGIC = "omni-msg"



def encode_envelope(header: dict[str, Any], shm_count: int = 0) -> bytes:
    """Encode a message header: a small dict of plain values (no tensors)."""
    if type(header) is not dict:
        raise CodecError(f"message header must be a dict with str keys, got {type(header).__name__}")
    st = EncodeState()
    tree = DEFAULT_CODEC.encode_tree(header, st, ["header"])
    if st.buffers or st.refs:
        raise CodecError("message header may not hold tensors or bytes over 64 KiB; put them in the payload")
    try:
        return encoder.encode([_HEADER_MAGIC, VERSION, tree, shm_count])
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
        outer = body_decoder.decode(mv)
    except msgspec.DecodeError as exc:
        raise CodecError(f"malformed message header: {exc}") from None
    except RecursionError:
        raise CodecError("malformed message header: nesting too deep") from None
    if not (isinstance(outer, list) and len(outer) == 4 and outer[0] == _HEADER_MAGIC):
        raise CodecError("malformed message header: not an omni message (bad magic)")
    if outer[1] != VERSION:
        raise CodecError(f"unsupported message version {outer[1]!r} (this side speaks {VERSION})")
    if type(outer[3]) is not int or outer[3] < 0:
        raise CodecError("malformed message header: bad shared-memory count")
    header = DecodeWalk([], [], DEFAULT_LIMITS).value(outer[2])
    if type(header) is not dict:
        raise CodecError("malformed message header: not a dict")
    return header, outer[3]
