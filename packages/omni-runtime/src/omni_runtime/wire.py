"""Payload frames: the seam between the runtime and the transport codec.

INTERIM: until omni_runtime.transport lands, payloads are encoded here with
msgspec ext types (tensors as dtype name + shape + raw bytes, inline).
"""

from __future__ import annotations

from typing import Any

import msgspec
import torch

_TENSOR = 1
_TUPLE = 2


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        dtype = str(t.dtype).removeprefix("torch.")
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return msgspec.msgpack.Ext(_TENSOR, msgspec.msgpack.encode([dtype, list(t.shape), raw]))
    raise TypeError(f"cannot encode {type(obj).__name__}")


def _ext_hook(code: int, data: memoryview) -> Any:
    if code == _TENSOR:
        dtype, shape, raw = msgspec.msgpack.decode(data)
        dt = getattr(torch, dtype)
        if not raw:
            return torch.empty(shape, dtype=dt)
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dt).reshape(shape)
    if code == _TUPLE:
        return tuple(_decoder.decode(data))
    raise ValueError(code)


_encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
_decoder = msgspec.msgpack.Decoder(ext_hook=_ext_hook)


def encode(obj: Any) -> list[Any]:
    return [_encoder.encode(obj)]


def decode(frames: list[Any]) -> Any:
    return _decoder.decode(frames[0])


def discard(frames: list[Any]) -> None:
    return None


def cleanup_process() -> None:
    return None


def cleanup_run(run_id: str) -> None:
    return None
