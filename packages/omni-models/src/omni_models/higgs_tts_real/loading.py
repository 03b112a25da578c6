"""Building the real Higgs-TTS modules from a checked checkpoint directory (cached per process,
so stages of one process share them)."""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from omni_models.common.weights import CheckpointError

from .backbone import HiggsBackbone
from .checkpoint import AUDIO_EMBEDDING, AUDIO_HEAD, BODY_PREFIX, TEXT_EMBEDDING, HiggsCheckpoint
from .codec import HiggsCodec, load_codec
from .hf_cache import cached_snapshot

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def require_path(model_path: str | None, load_format: str) -> str:
    """``--weights DIR``, else the published checkpoint's snapshot in the local Hugging Face cache."""
    if load_format != "safetensors":
        raise CheckpointError(
            f"load_format {load_format!r}: the real Higgs-TTS pipeline runs the published checkpoint only (no random weights)\n"
            "  fix: drop the load_format override (bosonai/higgs-tts-3-4b serves random weights of this shape)"
        )
    return str(Path(model_path)) if model_path else str(cached_snapshot())


@functools.cache
def open_checkpoint(model_path: str) -> HiggsCheckpoint:
    return HiggsCheckpoint.open(model_path)


def dtype_of(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise ValueError(f"dtype {name!r} is not supported; use one of: {', '.join(DTYPES)}")
    return DTYPES[name]


@functools.cache
def load_backbone(model_path: str, device: str, dtype: str = "float32") -> HiggsBackbone:
    ckpt = open_checkpoint(model_path)
    with torch.device("meta"):
        model = HiggsBackbone(ckpt.backbone, ckpt.audio)
    state = {k: v for k, v in ckpt.tensors(BODY_PREFIX).items() if k.startswith(("layers.", "norm."))}
    state["text_embedding.weight"] = ckpt.tensors(TEXT_EMBEDDING, strip=False)[TEXT_EMBEDDING]
    state["audio_embedding.weight"] = ckpt.tensors(AUDIO_EMBEDDING, strip=False)[AUDIO_EMBEDDING]
    if model.audio_head is not None:
        state["audio_head.weight"] = ckpt.tensors(AUDIO_HEAD, strip=False)[AUDIO_HEAD]
    expected = model.state_dict()
    wrong = [f"{k}: shape {tuple(state[k].shape)}, config.json gives {tuple(v.shape)}" for k, v in expected.items() if k in state and tuple(state[k].shape) != tuple(v.shape)]
    missing = [k for k in expected if k not in state]
    if wrong or missing:
        raise CheckpointError(
            f"{ckpt.root}: the safetensors do not fit config.json:\n  " + "\n  ".join((wrong + [f"{k}: missing" for k in missing])[:12])
            + "\n  fix: use the config.json published with these weights (text_config / audio_encoder_config)"
        )
    model.load_state_dict(state, strict=True, assign=True)
    model.reset_buffers("cpu")  # built on meta: compute the derived buffers for real
    model = model.to(device=device, dtype=dtype_of(dtype))
    return model.eval().requires_grad_(False)


@functools.cache
def load_higgs_codec(model_path: str, device: str, encoder: bool) -> HiggsCodec:
    ckpt = open_checkpoint(model_path)
    source = str(ckpt.codec_files[0].parent) if ckpt.codec_files else f"{ckpt.root} (bundled tied.embedding.modality_embeddings.0.model.*)"
    return load_codec(ckpt.codec_config, ckpt.codec_tensors(), encoder=encoder, source=source, config_source=ckpt.codec_config_source).to(device)
