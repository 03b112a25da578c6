"""A loaded Qwen3-TTS 12 Hz checkpoint: its parts, built from ``config.json`` and filled by key name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from omni_models.common.parallel import Shard

from . import checkpoint
from .codec import CodecDecoder
from .speaker import SpeakerEncoder
from .spec import CodecSpec, GenerationDefaults, ModelSpec, read_codec_spec, read_generation_defaults, read_model_spec
from .talker import Talker

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def dtype_of(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise ValueError(f"dtype {name!r} is not one of {sorted(DTYPES)}")
    return DTYPES[name]


@dataclass(frozen=True)
class Checkpoint:
    """The specs of one checkpoint directory (cheap: JSON only)."""

    directory: Path
    model: ModelSpec
    codec: CodecSpec
    defaults: GenerationDefaults

    @classmethod
    def open(cls, directory: str | Path) -> Checkpoint:
        path = Path(directory)
        return cls(path, read_model_spec(path), read_codec_spec(path), read_generation_defaults(path))

    def talker(self, device: str = "cpu", dtype: torch.dtype = torch.float32, shard: Shard | None = None) -> Talker:
        """The talker; ``shard``: a tensor-parallel rank's slice (it reads only that from the file)."""
        with torch.device("meta"):
            module = Talker(self.model, shard)
        module = module.to_empty(device="cpu")
        checkpoint.load(module, self.directory, "talker.")
        return module.to(device, dtype).eval()

    def speaker_encoder(self, device: str = "cpu") -> SpeakerEncoder:
        if self.model.speaker_encoder is None:
            raise ValueError(f"{self.directory}: a {self.model.variant} checkpoint has no speaker encoder")
        module = SpeakerEncoder(self.model.speaker_encoder)
        checkpoint.load(module, self.directory, "speaker_encoder.")
        return module.to(device).eval()

    def codec_decoder(self, device: str = "cpu", dtype: torch.dtype = torch.float32) -> CodecDecoder:
        module = CodecDecoder(self.codec)
        checkpoint.load(module, self.directory / checkpoint.CODEC_DIR, "decoder.")
        return module.to(device, dtype).eval()
