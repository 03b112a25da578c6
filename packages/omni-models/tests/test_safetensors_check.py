"""The generic checkpoint-file checks (torch-free): each damage is one Problem naming the file and key."""

from __future__ import annotations

import json
import pickle
import struct

import pytest

from omni_models.checkpoints.safetensors_check import CheckpointFileError, check_bounds, read_header, read_index, read_json


def _write(path, tensors: dict[str, tuple[str, list[int]]], truncate: int = 0, header_len: int | None = None):
    header, offset = {}, 0
    sizes = {"F32": 4, "I64": 8, "BOOL": 1}
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    blob = struct.pack("<Q", header_len if header_len is not None else len(raw)) + raw + b"\0" * offset
    path.write_bytes(blob[: len(blob) - truncate] if truncate else blob)
    return path


def test_a_whole_file_gives_shapes_without_torch(tmp_path):
    info = read_header(_write(tmp_path / "model.safetensors", {"w": ("F32", [2, 3])}), tmp_path)
    assert info["w"].shape == (2, 3) and info["w"].dtype == "F32"


@pytest.mark.parametrize(
    ("damage", "expect"),
    [
        (lambda p: _write(p, {"w": ("F32", [64, 64])}, truncate=100), "header says"),
        (lambda p: p.write_bytes(b""), "too short"),
        (lambda p: _write(p, {"w": ("F32", [2])}, header_len=100 * 1024**3), "over the"),
        (lambda p: p.write_bytes(pickle.dumps({"w": [1.0]})), "pickle"),
        (lambda p: _write(p, {"w": ("I64", [4])}), "stored as I64"),
        (lambda p: _write(p, {"w": ("BOOL", [4])}), "stored as BOOL"),
        (lambda p: p.write_bytes(struct.pack("<Q", 5) + b"nope!"), "not JSON"),
    ],
)
def test_each_damage_is_one_clear_problem(tmp_path, damage, expect):
    path = tmp_path / "model.safetensors"
    damage(path)
    with pytest.raises(CheckpointFileError) as info:
        read_header(path, tmp_path)
    assert expect in str(info.value) and "model.safetensors" in str(info.value) and "fix:" in str(info.value)


def test_a_truncated_file_says_both_sizes_and_download_again(tmp_path):
    path = _write(tmp_path / "model.safetensors", {"w": ("F32", [64, 64])}, truncate=100)
    with pytest.raises(CheckpointFileError) as info:
        read_header(path, tmp_path)
    message = str(info.value)
    assert "file has" in message and "download it again" in message


@pytest.mark.parametrize(("text", "expect"), [("not json {", "not JSON"), ("[" * 100_000 + "]" * 100_000, "nested deeper"), ("[1]", "not an object")])
def test_json_files_are_bounded(tmp_path, text, expect):
    (tmp_path / "tokenizer.json").write_text(text)
    with pytest.raises(CheckpointFileError, match=expect):
        read_json(tmp_path / "tokenizer.json", tmp_path)


@pytest.mark.parametrize(("shard", "expect"), [("pytorch_model.bin", "not a .safetensors"), ("/etc/passwd.safetensors", "outside"), ("../x.safetensors", "outside")])
def test_index_paths_stay_inside_the_folder(tmp_path, shard, expect):
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": shard}}))
    with pytest.raises(CheckpointFileError, match=expect):
        read_index(tmp_path / "model.safetensors.index.json", tmp_path)


def test_config_bounds():
    bounds = {"num_attention_heads": (1, 1024), "num_hidden_layers": (1, 1024), "rms_norm_eps": (0.0, 1.0), "max_new_tokens": (1, 1_000_000), "top_k": (0, 1_000_000)}
    config = {"num_attention_heads": 0, "num_hidden_layers": 10**9, "rms_norm_eps": float("nan"), "max_new_tokens": 10**18, "top_k": -1}
    problems = check_bounds("config.json", config, bounds)
    assert sorted(p.key for p in problems) == sorted(bounds)
    assert check_bounds("config.json", {"num_attention_heads": 16, "rms_norm_eps": 1e-6}, bounds) == []
