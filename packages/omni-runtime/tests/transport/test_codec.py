"""Codec round trips and error paths, in one process (cross-process: test_channel)."""

from __future__ import annotations

import math
import warnings

import msgspec
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transport_workers import raw_bytes

from omni_runtime.transport import SUPPORTED_DTYPES, Codec, CodecError, CodecLimits, ShmPool
from omni_runtime.transport.envelope import decode_envelope, encode_envelope


def random_tensor(dtype: torch.dtype, shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    """A tensor of ``dtype`` whose bytes are random (NaN patterns included)."""
    g = torch.Generator().manual_seed(seed)
    numel = math.prod(shape)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    itemsize = dtype.itemsize
    raw = torch.randint(0, 256, (numel * itemsize,), dtype=torch.uint8, generator=g)
    return raw.view(dtype).reshape(shape)


def same(a, b) -> bool:
    """Structural equality with exact types; tensors compared by dtype, shape, bytes."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and raw_bytes(a) == raw_bytes(b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def _quantized() -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized creation is deprecated; still a user input
        return torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)


SHAPES = [(), (0,), (1,), (7,), (3, 0, 2), (2, 3, 5), (1, 1, 1, 1, 2)]


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_every_dtype_and_shape_round_trips_bytes_exactly(dtype):
    codec = Codec()
    value = {f"s{i}": random_tensor(dtype, shape, seed=i) for i, shape in enumerate(SHAPES)}
    out = codec.decode(codec.encode(value).frames)
    assert same(out, value)


def test_required_dtypes_are_supported():
    names = {str(d) for d in SUPPORTED_DTYPES}
    for required in [
        "torch.bfloat16",
        "torch.bool",
        "torch.complex64",
        "torch.complex128",
        "torch.float16",
        "torch.float32",
        "torch.float64",
        "torch.int8",
        "torch.uint8",
        "torch.int64",
    ]:
        assert required in names
    if hasattr(torch, "float8_e4m3fn"):
        assert "torch.float8_e4m3fn" in names and "torch.float8_e5m2" in names


def test_plain_types_round_trip_with_exact_types():
    value = {
        "none": None,
        "t": True,
        "f": False,
        "int_min": -(2**63),
        "uint_max": 2**64 - 1,
        "zero": 0,
        "float": -1.5e300,
        "nan": float("nan"),
        "inf": float("-inf"),
        "str": "héllo \u2603 \x00",
        "empty": "",
        "bytes": b"\x00\xff" * 10,
        "empty_bytes": b"",
        "big_bytes": bytes(range(256)) * 1024,
        "list": [1, [2, [3]], []],
        "tuple": (
            1,
            ("a", ()),
            [
                (),
            ],
        ),
        "nested": {"a": {"b": {"c": [None, (True,)]}}},
        "": "empty key",
    }
    codec = Codec()
    out = codec.decode(codec.encode(value).frames)
    assert same(out, value)
    assert type(out["tuple"]) is tuple and type(out["tuple"][1][1]) is tuple
    assert type(out["list"]) is list and type(out["tuple"][2]) is list
    assert type(out["big_bytes"]) is bytes


def test_top_level_values_of_every_plain_type():
    codec = Codec()
    for value in [None, 1, 2.0, "s", b"b", True, [1], (1,), {"k": 1}, torch.ones(2)]:
        assert same(codec.decode(codec.encode(value).frames), value)


def test_non_contiguous_and_view_tensors_round_trip():
    base = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    cplx = torch.randn(4, 3, dtype=torch.complex64)
    value = {
        "transposed": base.transpose(0, 2),
        "sliced": base[1:, ::2, 3],
        "offset": base.reshape(-1)[7:19],
        "expanded": torch.tensor([[1.0], [2.0]]).expand(2, 6),
        "conj": cplx.conj(),
        "neg_view": torch._neg_view(cplx) if hasattr(torch, "_neg_view") else -cplx,
        "bf16_t": torch.randn(5, 7).to(torch.bfloat16).t(),
        "grad": torch.ones(3, requires_grad=True) * 2,
    }
    codec = Codec()
    out = codec.decode(codec.encode(value).frames)
    for k, v in value.items():
        expected = v.detach().resolve_conj().resolve_neg()
        assert out[k].dtype == expected.dtype and out[k].shape == expected.shape, k
        assert raw_bytes(out[k]) == raw_bytes(expected), k
        assert out[k].is_contiguous() and not out[k].requires_grad


def test_small_tensors_are_separate_frames_not_copied_into_the_body():
    t = torch.arange(1000, dtype=torch.int64)
    enc = Codec().encode({"t": t})
    assert len(enc.frames) == 2
    assert len(enc.frames[0]) < 200
    # zero-copy: the frame is a view of the tensor's own memory
    assert memoryview(enc.frames[1]).nbytes == 8000
    t[0] = 42
    assert bytes(memoryview(enc.frames[1]).cast("B")[:8]) == (42).to_bytes(8, "little")


def test_received_inline_tensor_is_writable_and_private():
    frames = Codec().encode({"t": torch.zeros(4)}).frames
    frozen = [bytes(f) for f in frames]  # read-only buffers, as from a bytes source
    out = Codec().decode(frozen)
    out["t"].add_(1)
    assert frozen[1] == bytes(16)


def test_large_tensors_use_shared_memory_and_small_ones_inline(run_dir):
    with ShmPool(run_dir.shm_prefix, budget_bytes=64 << 20) as pool:
        codec = Codec(pool=pool, shm_threshold=1 << 20)
        big = torch.randn(1 << 18)  # exactly 1 MiB
        small = torch.randn(1000)
        enc = codec.encode({"big": big, "small": small, "big_t": torch.randn(512, 1024).t()})
        assert len(enc.leases) == 2 and len(enc.frames) == 2
        enc.mark_sent()
        out = codec.decode(enc.frames)
        assert torch.equal(out["big"], big) and torch.equal(out["small"], small)
        assert pool.busy_segments == 0


@pytest.mark.parametrize(
    "value, fragment",
    [
        ({"a": {1: "x"}}, "value['a']: dict key 1 is a int"),
        ({"a": [1, {2.0}]}, "value['a'][1]: type builtins.set"),
        ({"x": bytearray(b"a")}, "convert it with bytes(...)"),
        ({"x": 2**64}, "outside int64/uint64"),
        ({"x": -(2**63) - 1}, "outside int64/uint64"),
        ({"x": object()}, "value['x']: type builtins.object cannot be sent"),
        ({"x": lambda: 1}, "cannot be sent across processes"),
        ({"x": torch.ones(2).to_sparse()}, "call .to_dense() first"),
        ({"x": _quantized()}, "not supported on the wire"),
        ({"x": torch.empty(2, device="meta")}, "meta tensors"),
        ({"x": "\ud800"}, "cannot encode value"),
    ],
)
def test_unsupported_values_raise_codec_error_naming_the_path(value, fragment):
    with pytest.raises(CodecError) as info:
        Codec().encode(value)
    assert fragment in str(info.value)


def test_encode_depth_limit():
    value: list = []
    for _ in range(200):
        value = [value]
    with pytest.raises(CodecError, match="deeper than 100"):
        Codec().encode(value)


def test_subclasses_of_plain_types_encode_as_the_plain_type():
    import enum

    class Color(enum.IntEnum):
        RED = 3

    class Name(str):
        pass

    out = Codec().decode(Codec().encode([Color.RED, Name("x")]).frames)
    assert out == [3, "x"] and type(out[0]) is int and type(out[1]) is str


def _frames(value):
    return [bytes(f) for f in Codec().encode(value).frames]


def _body(tree, refs=()):
    return msgspec.msgpack.encode(["omni", 1, list(refs), tree])


def _tensor_ext(dtype, shape, where, index):
    return msgspec.msgpack.Ext(2, msgspec.msgpack.encode([dtype, shape, where, index]))


@pytest.mark.parametrize(
    "frames, fragment",
    [
        ([], "no frames"),
        ([b""], "malformed message body"),
        ([b"\xc1"], "malformed message body"),
        ([msgspec.msgpack.encode(["omni", 1, []])], "bad magic"),
        ([msgspec.msgpack.encode(["nope", 1, [], None])], "bad magic"),
        ([msgspec.msgpack.encode(["omni", 99, [], None])], "unsupported codec version 99"),
        ([_body(msgspec.msgpack.Ext(77, b""))], "unknown type tag 77"),
        ([_body(msgspec.msgpack.Ext(1, b"x"))], "tuple marker carries data"),
        ([_body([1, msgspec.msgpack.Ext(1, b"")])], "tuple marker outside"),
        ([_body({"a": msgspec.msgpack.Ext(2, b"\xc1")})], "malformed tensor header"),
        ([_body(_tensor_ext("float99", [2], 0, 0)), b"\0" * 8], "unknown tensor dtype 'float99'"),
        ([_body(_tensor_ext("float32", [-1], 0, 0)), b"\0" * 4], "malformed tensor shape"),
        ([_body(_tensor_ext("float32", [2], 5, 0)), b"\0" * 8], "malformed tensor location"),
        ([_body(_tensor_ext("float32", [3], 0, 0)), b"\0" * 8], "needs 12 bytes, frame has 8"),
        ([_body(_tensor_ext("float32", [2], 0, 1)), b"\0" * 8], "out of range"),
        ([_body([_tensor_ext("float32", [2], 0, 0), _tensor_ext("float32", [2], 0, 0)]), b"\0" * 8], "reused"),
        ([_body(None), b"extra"], "unreferenced buffer"),
        ([_body({1: 2})], "dict key 1 is not a str"),
        ([_body(None, [["x", 1]])], "malformed shared-memory reference"),
        ([_body(_tensor_ext("float32", [2], 1, 0), [["../etc/passwd", 1, 8]])], "invalid shared-memory segment name"),
        ([_body(_tensor_ext("float32", [2], 1, 0), [["omni-nonexistent-segment", 1, 8]])], "does not exist"),
        ([_body(msgspec.msgpack.Ext(3, b"\xc1"))], "malformed bytes reference"),
        ([_body(msgspec.msgpack.Ext(3, msgspec.msgpack.encode(0)))], "out of range"),
        ([object()], "is not a buffer"),
    ],
)
def test_malformed_frames_raise_codec_error(frames, fragment):
    with pytest.raises(CodecError) as info:
        Codec().decode(frames)
    assert fragment in str(info.value)


def test_truncated_and_corrupted_real_messages_raise_codec_error():
    frames = _frames({"a": torch.arange(10), "b": [1, 2, (3,)], "c": "text"})
    body = frames[0]
    for cut in range(len(body)):
        with pytest.raises(CodecError):
            Codec().decode([body[:cut], *frames[1:]])
    with pytest.raises(CodecError, match="needs 80 bytes"):
        Codec().decode([body, frames[1][:-1]])


def test_decode_respects_size_limits():
    limits = CodecLimits(max_body_bytes=100, max_buffer_bytes=1000, max_buffers=2, max_depth=5)
    codec = Codec(limits=limits)
    with pytest.raises(CodecError, match="exceeds the 100-byte limit"):
        codec.decode(_frames("x" * 200))
    with pytest.raises(CodecError, match="exceeds the 1000-byte limit"):
        codec.decode(_frames(torch.zeros(1000)))
    with pytest.raises(CodecError, match="3 buffer frames"):
        codec.decode(_frames([torch.zeros(1)] * 3))
    with pytest.raises(CodecError, match="nesting deeper than 5"):
        codec.decode(_frames([[[[[[1]]]]]]))
    deep = b"\x91" * 100000 + b"\xc0"  # 100k nested arrays
    with pytest.raises(CodecError):
        Codec().decode([deep])
    with pytest.raises(CodecError, match="exceeds the 1000-byte frame limit"):
        codec.encode(torch.zeros(1000))


def test_envelope_round_trip_and_errors():
    frame = encode_envelope({"kind": "data", "rid": "r1", "seq": 3, "t": (1, 2)}, 2)
    assert decode_envelope(frame) == ({"kind": "data", "rid": "r1", "seq": 3, "t": (1, 2)}, 2)
    with pytest.raises(CodecError, match="may not hold tensors"):
        encode_envelope({"t": torch.ones(1)})
    with pytest.raises(CodecError, match="must be a dict"):
        encode_envelope(["x"])
    with pytest.raises(CodecError, match="bad magic"):
        decode_envelope(_frames({"a": 1})[0])
    with pytest.raises(CodecError, match="malformed message header"):
        decode_envelope(b"\x94")


def test_device_argument_moves_tensors_on_decode():
    frames = Codec().encode({"t": torch.ones(3)}).frames
    out = Codec().decode(frames, device="cpu")
    assert out["t"].device.type == "cpu"
    if torch.cuda.is_available():  # pragma: no cover - CI has no GPU
        out = Codec().decode(Codec().encode({"t": torch.ones(3, device="cuda")}).frames, device="cuda:0")
        assert out["t"].device.type == "cuda"


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=100),
)
_tensors = st.builds(
    random_tensor,
    st.sampled_from(SUPPORTED_DTYPES),
    st.lists(st.integers(0, 4), max_size=3).map(tuple),
    st.integers(0, 1000),
)
_values = st.recursive(
    st.one_of(_scalars, _tensors),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_values)
def test_property_any_nested_value_round_trips(value):
    codec = Codec()
    assert same(codec.decode(codec.encode(value).frames), value)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_property_garbage_never_crashes_decoder(data):
    try:
        Codec().decode([data])
    except CodecError:
        pass


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_travel_via_cpu_and_land_on_the_receivers_device(run_dir):  # pragma: no cover - no GPU in CI
    with ShmPool(run_dir.shm_prefix, budget_bytes=64 * (1 << 20)) as pool:
        codec = Codec(pool=pool, shm_threshold=1 << 20)
        value = {
            "small": torch.randn(7, 5, device="cuda").to(torch.bfloat16),
            "large": torch.randn(1024, 1024, device="cuda").t(),  # non-contiguous, via SHM
        }
        enc = codec.encode(value)
        assert len(enc.leases) == 1
        enc.mark_sent()
        out = codec.decode(enc.frames, device="cuda:0")
        for k, v in value.items():
            assert out[k].device == torch.device("cuda:0")
            assert raw_bytes(out[k]) == raw_bytes(v)
        assert pool.busy_segments == 0
