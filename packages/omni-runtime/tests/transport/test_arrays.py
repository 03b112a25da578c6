"""The receiver picks the array type: numpy arrays and torch tensors are the same bytes on the wire.

``omni serve`` decodes results into numpy (``Codec(arrays="numpy")``) so it never loads
torch, and sends numpy arrays (decoded reference audio) that workers receive as tensors.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from omni_runtime.transport import Codec, CodecError, ShmPool
from omni_runtime.transport.dtypes import NUMPY_NAMES

NUMPY_DTYPES = sorted(NUMPY_NAMES)


def _array(name: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(7)
    if name == "bool":
        return rng.random(shape) > 0.5
    return rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(name).itemsize, dtype=np.uint8).view(name).reshape(shape)


@pytest.mark.parametrize("name", NUMPY_DTYPES)
@pytest.mark.parametrize("where", ["inline", "chunked", "shm"])
def test_a_numpy_array_decodes_into_the_same_tensor_and_back_into_the_same_array(name, where, run_dir):
    shape = (3, 50000) if where != "inline" else (2, 3)
    value = _array(name, shape)[:, ::2]  # not contiguous: the encoder copies what it must
    with ShmPool(run_dir.shm_prefix, budget_bytes=16 << 20) as pool:
        sender = Codec(pool=pool if where == "shm" else None, shm_threshold=1 << 10, chunk_bytes=4096 if where == "chunked" else None)
        as_tensor = Codec(arrays="torch").decode(_sent(sender, {"x": value}))["x"]
        as_array = Codec(arrays="numpy").decode(_sent(sender, {"x": value}))["x"]
        assert pool.busy_segments == 0
    assert isinstance(as_tensor, torch.Tensor) and str(as_tensor.dtype) == f"torch.{name}"
    assert as_tensor.numpy().tobytes() == value.tobytes()
    assert isinstance(as_array, np.ndarray) and as_array.dtype == value.dtype and as_array.shape == value.shape
    assert as_array.tobytes() == value.tobytes() and as_array.flags.writeable


def _sent(codec: Codec, value) -> list:
    encoded = codec.encode(value)
    encoded.mark_sent()
    return encoded.frames


def test_a_tensor_decodes_into_numpy_and_a_dtype_numpy_lacks_stays_a_tensor():
    frames = Codec().encode({"audio": torch.linspace(-1, 1, 5), "h": torch.ones(2, dtype=torch.bfloat16), "empty": torch.zeros(0, 3)}).frames
    out = Codec(arrays="numpy").decode(frames)
    assert isinstance(out["audio"], np.ndarray) and np.allclose(out["audio"], np.linspace(-1, 1, 5, dtype=np.float32))
    assert isinstance(out["h"], torch.Tensor) and out["h"].dtype == torch.bfloat16  # no numpy twin: meaning kept
    assert out["empty"].shape == (0, 3)


def test_big_endian_arrays_travel_in_host_order_and_other_dtypes_are_refused_by_path():
    out = Codec(arrays="numpy").decode(Codec().encode(np.arange(4, dtype=">i4")).frames)
    assert out.dtype == np.int32 and out.tolist() == [0, 1, 2, 3]
    with pytest.raises(CodecError, match=r"value\['s'\]: numpy dtype <U1 is not supported"):
        Codec().encode({"s": np.array(["a"])})
    with pytest.raises(ValueError, match="arrays='numpy'|Codec\\(arrays='torch'\\)"):
        Codec(arrays="numpy").decode(Codec().encode(torch.ones(1)).frames, device="cuda:0")


def test_the_transport_and_a_numpy_round_trip_never_import_torch():
    code = (
        "import sys, numpy as np\n"
        "from omni_runtime.transport import Codec\n"
        "c = Codec(arrays='numpy')\n"
        "out = c.decode(c.encode({'a': np.ones(3, np.float32), 'n': [1, 'x', None]}).frames)\n"
        "assert out['a'].tolist() == [1.0, 1.0, 1.0]\n"
        "print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
