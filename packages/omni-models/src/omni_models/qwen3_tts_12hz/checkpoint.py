"""A Qwen3-TTS 12 Hz checkpoint on disk: where it is, whether it is whole, and its tensors by name.

- ``resolve(model_id, weights)``: ``--weights DIR``, else the model's snapshot in the local
  Hugging Face cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``;
  ``models--Org--Name/refs/main`` -> ``snapshots/<commit>``), never the network.
- ``verify(directory)``: every file the stages read and every tensor they load, with its shape,
  checked from the safetensors headers (no tensor is read); all problems in one error, each naming
  the file, the key and the fix. The CLI runs it before any process starts.
- ``load(module, directory, file, prefix)``: a module's parameters by their published names
  (single file, or sharded with ``*.safetensors.index.json``), reading only the keys it needs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from omni_models.common.hf_cache import cached_snapshot, hub_cache
from omni_models.common.parallel import full_shape, read_shard, shard_specs

from .spec import CheckpointError, read_codec_spec, read_generation_defaults, read_model_spec

MODEL_FILE = "model.safetensors"
CODEC_DIR = "speech_tokenizer"


def resolve(model_id: str, weights: str | None) -> str:
    """The checkpoint directory to serve ``model_id`` from, verified."""
    if weights is not None:
        directory = Path(weights)
    else:
        snapshot = cached_snapshot(model_id)
        if snapshot is None:
            raise CheckpointError(
                f"{model_id}: no checkpoint given and none in the Hugging Face cache {hub_cache()}\n"
                f"  rule: this model runs its published weights; omni never downloads them\n"
                f"  fix:  --weights DIR (a local copy of {model_id}), or set HF_HUB_CACHE / HF_HOME to the cache that holds it"
            )
        directory = snapshot
    verify(directory)
    return str(directory.resolve())


class _Files:
    """The safetensors files of one directory: key -> file, via the index when sharded."""

    def __init__(self, directory: Path, name: str = MODEL_FILE):
        self.directory = directory
        single = directory / name
        index = directory / f"{name}.index.json"
        if single.is_file():
            self.weight_map = None
            self.files = [single]
        elif index.is_file():
            try:
                weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            except (OSError, ValueError, KeyError) as exc:
                raise CheckpointError(f"{index}: unreadable index ({exc})\n  fix:  re-download {index.name}") from None
            self.weight_map = {k: directory / v for k, v in weight_map.items()}
            self.files = sorted(set(self.weight_map.values()))
            missing = [f for f in self.files if not f.is_file()]
            if missing:
                raise CheckpointError("\n".join(f"{f}: missing (listed in {index.name})\n  fix:  download {f.name} into {directory}" for f in missing))
        else:
            raise CheckpointError(f"{single}: missing (nor {index.name})\n  fix:  download the checkpoint's safetensors into {directory}")
        self._shapes: dict[str, tuple[Path, tuple[int, ...]]] | None = None

    def shapes(self) -> dict[str, tuple[Path, tuple[int, ...]]]:
        from safetensors import safe_open

        if self._shapes is None:
            shapes = {}
            for path in self.files:
                with safe_open(str(path), framework="pt") as handle:
                    for key in handle.keys():
                        shapes[key] = (path, tuple(handle.get_slice(key).get_shape()))
            self._shapes = shapes
        return self._shapes

    def problems(self, expected: dict[str, tuple[int, ...]]) -> list[str]:
        shapes = self.shapes()
        out = []
        where = self.files[0] if self.weight_map is None else self.directory / f"{self.files[0].name.split('-')[0]}*.safetensors"
        for key, shape in expected.items():
            if key not in shapes:
                out.append(f"{where}: key {key} is missing\n  fix:  use the published, complete checkpoint (this file is truncated or from another model)")
            elif shapes[key][1] != shape:
                out.append(
                    f"{shapes[key][0]}: key {key} has shape {list(shapes[key][1])}, config.json implies {list(shape)}\n"
                    "  fix:  use the config.json that belongs to these weights"
                )
        return out

    def read(self, keys: list[str], specs: dict[str, Any] | None = None) -> dict[str, torch.Tensor]:
        """The tensors of ``keys``; a key with a ``ShardSpec`` in ``specs`` is read as this rank's slice only."""
        from safetensors import safe_open

        shapes = self.shapes()
        by_file: dict[Path, list[str]] = {}
        for key in keys:
            by_file.setdefault(shapes[key][0], []).append(key)
        out = {}
        for path, names in by_file.items():
            with safe_open(str(path), framework="pt") as handle:
                for name in names:
                    out[name] = read_shard(handle, name, (specs or {}).get(name))
        return out


def expected(module: nn.Module, prefix: str) -> dict[str, tuple[int, ...]]:
    """Checkpoint key -> the shape the file must have (the full shape of a tensor-parallel slice)."""
    specs = shard_specs(module)
    return {prefix + name: full_shape(specs, name, t) for name, t in module.state_dict().items()}


def load(module: nn.Module, directory: Path, prefix: str, name: str = MODEL_FILE) -> nn.Module:
    """Fill ``module``'s parameters from the checkpoint keys ``prefix + name``; refuse on any gap."""
    files = _Files(directory, name)
    wanted = expected(module, prefix)
    problems = files.problems(wanted)
    if problems:
        raise CheckpointError("\n".join(problems))
    tensors = files.read(list(wanted), {prefix + k: v for k, v in shard_specs(module).items()})
    module.load_state_dict({key[len(prefix) :]: value for key, value in tensors.items()}, strict=True)
    return module


def verify(directory: Path) -> None:
    """Every file and tensor the stages need, checked before anything is built; all problems at once."""
    from .codec import CodecDecoder
    from .speaker import SpeakerEncoder
    from .talker import Talker
    from .text import TextTokenizer

    if not directory.is_dir():
        raise CheckpointError(f"{directory}: not a directory\n  fix:  pass the checkpoint directory (it holds config.json and model.safetensors)")
    problems: list[str] = []

    def attempt(step: Any) -> Any:
        try:
            return step()
        except CheckpointError as exc:
            problems.append(str(exc))
            return None

    model = attempt(lambda: read_model_spec(directory))
    codec = attempt(lambda: read_codec_spec(directory))
    attempt(lambda: read_generation_defaults(directory))
    attempt(lambda: TextTokenizer(directory))
    parts = []
    with torch.device("meta"):
        if model is not None:
            parts.append((Talker(model), "talker.", directory))
            if model.speaker_encoder is not None:
                parts.append((SpeakerEncoder(model.speaker_encoder), "speaker_encoder.", directory))
        if codec is not None:
            parts.append((CodecDecoder(codec), "decoder.", directory / CODEC_DIR))
    for module, prefix, where in parts:
        found = attempt(lambda where=where, module=module, prefix=prefix: _Files(where).problems(expected(module, prefix)))
        problems += found or []
    if problems:
        raise CheckpointError("\n".join(dict.fromkeys(problems)))
