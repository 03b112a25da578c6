"""Checks every real model's checkpoint shares, without torch: safetensors headers, JSON files,
index paths, config bounds.

A damaged or hostile ``--weights`` directory must end in one clear error (file, key, what is
wrong, the fix), fast and in bounded memory, before anything is built. Opening a damaged file
with ``safetensors`` or building a model from an absurd ``config.json`` gives a traceback, a
multi-gigabyte allocation or a hang instead, so each model's checkpoint check reads its files
through these functions first:

- :func:`read_header` parses a ``.safetensors`` header itself (8-byte length, JSON, offsets),
  refusing a pickle or zip under that name, a header over :data:`MAX_HEADER_BYTES`, a file shorter
  than its header says ("header says N bytes, file has M": download it again), overlapping or
  out-of-range offsets and dtypes outside ``dtypes``. No tensor is read.
- :func:`read_json` reads a JSON file of bounded size and nesting depth, as an object.
- :func:`read_index` reads ``*.safetensors.index.json``; every shard it names must be a relative
  ``.safetensors`` path that stays inside the checkpoint directory.
- :func:`check_bounds` checks integer and float config fields against (low, high) bounds
  (a zero head count, 10^9 layers, a NaN epsilon).

Each problem is a :class:`Problem`; callers collect them all and raise their model's error once.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

#: a real header is a few hundred KiB even for a 10^4-tensor checkpoint
MAX_HEADER_BYTES = 100 * 1024 * 1024
#: config.json, tokenizer_config.json, generation_config.json... (tokenizer.json is larger)
MAX_JSON_BYTES = 64 * 1024 * 1024
MAX_JSON_DEPTH = 64
#: dtypes a model's floating-point weights may be stored in
FLOAT_DTYPES = frozenset({"F16", "BF16", "F32", "F64"})
_DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
                "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
DOWNLOAD_AGAIN = "download it again (the copy on disk is damaged or incomplete)"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a checkpoint: the file (relative to the checkpoint), the key, what, the fix."""

    file: str
    key: str
    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.file}: {self.key}: {self.what}\n  fix:  {self.fix}"


class CheckpointFileError(ValueError):
    """One or more :class:`Problem` s; ``str()`` lists each with its fix."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]


def _name(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            pass
    return str(path)


def read_header(path: Path, root: Path | None = None, dtypes: frozenset[str] | None = FLOAT_DTYPES) -> dict[str, TensorInfo]:
    """Tensor name -> dtype and shape from a safetensors file's header (no tensor is read).

    Raises :class:`CheckpointFileError` for anything but a whole, well-formed safetensors file whose
    tensors all have a dtype in ``dtypes`` (None: any)."""
    name = _name(path, root)
    bad = lambda key, what, fix=DOWNLOAD_AGAIN: CheckpointFileError([Problem(name, key, what, fix)])  # noqa: E731
    try:
        size = os.stat(path).st_size
        with open(path, "rb") as handle:
            head = handle.read(8)
            if head[:1] == b"\x80" or head[:2] == b"PK":
                raise bad("(file)", "a pickle (or zip) archive, not safetensors: omni never unpickles weights",
                          "use the published .safetensors file (convert a .bin/.pt with safetensors' own tools)")
            if len(head) < 8:
                raise bad("(header)", f"the file has {size} bytes, too short for a safetensors header")
            length = int.from_bytes(head, "little")
            if length > MAX_HEADER_BYTES:
                raise bad("(header)", f"header says {length} bytes, over the {MAX_HEADER_BYTES} a safetensors header may have (file has {size})")
            if 8 + length > size:
                raise bad("(header)", f"header says {8 + length} bytes, file has {size}")
            raw = handle.read(length)
    except OSError as exc:
        raise bad("(file)", f"cannot be read ({exc.strerror or exc})", "check the file's permissions, or download it again") from None
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError):
        raise bad("(header)", "the header is not JSON") from None
    if not isinstance(header, dict):
        raise bad("(header)", "the header is not a JSON object")
    data = size - 8 - length
    tensors: dict[str, TensorInfo] = {}
    problems: list[Problem] = []
    spans = []
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("shape"), list) or not isinstance(entry.get("data_offsets"), list):
            problems.append(Problem(name, key, "the header entry has no shape and data_offsets", DOWNLOAD_AGAIN))
            continue
        dtype, shape, offsets = entry.get("dtype"), entry["shape"], entry["data_offsets"]
        if dtype not in _DTYPE_BYTES or not all(type(d) is int and d >= 0 for d in shape) or len(offsets) != 2 or not all(type(o) is int for o in offsets):
            problems.append(Problem(name, key, f"malformed header entry {json.dumps(entry)[:120]}", DOWNLOAD_AGAIN))
            continue
        begin, end = offsets
        if not 0 <= begin <= end or end - begin != math.prod(shape) * _DTYPE_BYTES[dtype]:
            problems.append(Problem(name, key, f"data_offsets {offsets} do not hold a {dtype} tensor of shape {shape}", DOWNLOAD_AGAIN))
            continue
        if end > data:
            problems.append(Problem(name, key, f"header says {8 + length + end} bytes, file has {size}", DOWNLOAD_AGAIN))
            continue
        if dtypes is not None and dtype not in dtypes:
            problems.append(Problem(name, key, f"stored as {dtype}; this model's weights are floating point ({', '.join(sorted(dtypes))})",
                                    "use the published checkpoint (weights are not integers or booleans)"))
            continue
        spans.append((begin, end, key))
        tensors[key] = TensorInfo(dtype, tuple(shape))
    spans.sort()
    for (_, end, first), (begin, _, second) in pairwise(spans):
        if begin < end:
            problems.append(Problem(name, second, f"its bytes overlap those of {first}", DOWNLOAD_AGAIN))
            break
    if problems:
        raise CheckpointFileError(problems[:8] + ([Problem(name, f"... {len(problems) - 8} more", "tensors are damaged", DOWNLOAD_AGAIN)] if len(problems) > 8 else []))
    return tensors


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def read_json(path: Path, root: Path | None = None, fix: str = DOWNLOAD_AGAIN, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> dict[str, Any]:
    """A JSON object from ``path``, bounded in size and nesting; :class:`CheckpointFileError` otherwise."""
    name = _name(path, root)
    try:
        size = os.stat(path).st_size
        if size > max_bytes:
            raise CheckpointFileError([Problem(name, "(file)", f"{size} bytes, over the {max_bytes} such a file may have", fix)])
        text = path.read_bytes()
    except OSError as exc:
        raise CheckpointFileError([Problem(name, "(file)", f"cannot be read ({exc.strerror or exc})", fix)]) from None
    opened = text.count(b"[") + text.count(b"{")
    try:
        value = json.loads(text)
    except RecursionError:
        raise CheckpointFileError([Problem(name, "(file)", f"nested deeper than {max_depth} levels", fix)]) from None
    except ValueError as exc:
        raise CheckpointFileError([Problem(name, "(file)", f"not JSON ({exc})", fix)]) from None
    if opened > max_depth and _depth(value) > max_depth:
        raise CheckpointFileError([Problem(name, "(file)", f"nested deeper than {max_depth} levels", fix)])
    if not isinstance(value, dict):
        raise CheckpointFileError([Problem(name, "(file)", f"a JSON {type(value).__name__}, not an object", fix)])
    return value


def read_index(path: Path, root: Path) -> dict[str, Path]:
    """Tensor name -> shard path from a ``*.safetensors.index.json``; each shard a relative
    ``.safetensors`` file inside ``root`` (an absolute path, ``..`` or a ``.bin`` is refused)."""
    index = read_json(path, root, "restore the index published with the shards")
    name = _name(path, root)
    mapping = index.get("weight_map")
    if not isinstance(mapping, dict) or not mapping:
        raise CheckpointFileError([Problem(name, "weight_map", "an object mapping tensor names to shard files is required", "restore the index published with the shards")])
    top = root.resolve()
    out: dict[str, Path] = {}
    problems: dict[str, Problem] = {}
    for key, shard in mapping.items():
        if not isinstance(shard, str) or not shard.endswith(".safetensors"):
            problems.setdefault(str(shard), Problem(name, f"weight_map[{key}]", f"{shard!r} is not a .safetensors file (omni never loads pickled .bin/.pt weights)",
                                                    "use the published safetensors shards and their index"))
            continue
        target = (root / shard).resolve()
        if Path(shard).is_absolute() or not target.is_relative_to(top):
            problems.setdefault(shard, Problem(name, f"weight_map[{key}]", f"{shard!r} points outside the checkpoint directory {root}",
                                               "shard paths are file names next to the index; restore the published index"))
            continue
        out[key] = root / shard
    if problems:
        raise CheckpointFileError(problems.values())
    return out


def check_bounds(file: str, config: Mapping[str, Any], bounds: Mapping[str, tuple[float, float]], prefix: str = "") -> list[Problem]:
    """Problems for fields of ``config`` outside their inclusive (low, high) bounds; an ``int``
    bound (both ends ints) also requires an integer. Absent fields are the caller's to default."""
    problems = []
    for key, (low, high) in bounds.items():
        if key not in config:
            continue
        value = config[key]
        integral = isinstance(low, int) and isinstance(high, int)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or (integral and not isinstance(value, int)) or (isinstance(value, float) and not math.isfinite(value)) or not low <= value <= high:
            kind = "an integer" if integral else "a finite number"
            problems.append(Problem(file, prefix + key, f"{value!r} is not {kind} in [{low}, {high}]", f"use the {file} published with the checkpoint"))
    return problems
