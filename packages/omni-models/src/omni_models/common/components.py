"""Component builders and the per-stage weight loader.

A model lists its components once (``components()`` in its ``stages.py``: name -> (builder,
config)); stages fetch them through ``Loader.get`` and the checkpoint exporter writes the same
names, so dummy weights, exported checkpoints and loaded checkpoints always agree on shapes.
Builders are module-level functions of a frozen config, which keeps them hashable for the
get-or-load cache in ``weights.load_component``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .ar import ARConfig, ARModel
from .codec import CodecConfig, CodecDecoder, CodecEncoder, ResidualVQ
from .parallel import Shard, process_shard
from .sampling import stable_seed
from .speaker import SpeakerEncoder, SpeakerEncoderConfig
from .tp_engine import engage
from .weights import DEFAULT_SEED, LOAD_FORMATS, init_dummy, load_component, resolve_device, save_checkpoint

Component = tuple[Callable[[Any], nn.Module], Hashable]


def build_ar(config: ARConfig, shard: Shard | None = None) -> nn.Module:
    return ARModel(config, shard)


def build_rvq(config: CodecConfig) -> nn.Module:
    return ResidualVQ(config.num_codebooks, config.codebook_size, config.latent_dim)


def build_codec_decoder(config: CodecConfig) -> nn.Module:
    return CodecDecoder(config.latent_dim, config.hop, config.channels, config.width)


def build_codec_encoder(config: CodecConfig) -> nn.Module:
    return CodecEncoder(config.hop, config.latent_dim, config.width)


def build_speaker_encoder(config: SpeakerEncoderConfig) -> nn.Module:
    return SpeakerEncoder(config)


@dataclass(frozen=True)
class Loader:
    """How a stage gets its weights: ``load_format``, ``model_path``, ``seed`` and ``device``."""

    load_format: str = "dummy"
    model_path: str | None = None
    seed: int = DEFAULT_SEED
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.load_format not in LOAD_FORMATS:
            raise ValueError(f"load_format {self.load_format!r} is not supported; use one of: {', '.join(LOAD_FORMATS)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")  # noqa: TRY004 - a config value: reported like every other config error
        torch.device(self.device)  # rejects a malformed device string early

    @classmethod
    def create(cls, load_format: str, model_path: str | None, seed: int, device: str | None, num_threads: int | None = 1) -> Loader:
        """``num_threads`` sets the process's intra-op CPU threads: these stages run many tiny
        matmuls per step, which are several times slower when split across busy cores."""
        if num_threads is not None:
            if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
                raise ValueError(f"num_threads must be a positive integer or null, got {num_threads!r}")
            torch.set_num_threads(num_threads)
        path = None if load_format == "dummy" else model_path
        return cls(load_format, None if path is None else str(path), seed, resolve_device(device))

    def get(self, components: dict[str, Component], name: str) -> Any:
        build, config = components[name]
        shard, group = process_shard(build)  # a rank of a TP group shards what its builder can shard
        module = load_component(build, config, name, self.load_format, self.model_path, self.seed, self.device, shard)
        return module if shard is None else engage(module, group)


def export_dummy_checkpoint(components: dict[str, Component], directory: str, seed: int = DEFAULT_SEED) -> str:
    """Write the seeded random weights of every component as a safetensors checkpoint directory
    (the layout ``load_format: safetensors`` reads)."""
    modules = {name: init_dummy(build(config), stable_seed(seed, name)) for name, (build, config) in components.items()}
    return str(save_checkpoint(directory, modules))
