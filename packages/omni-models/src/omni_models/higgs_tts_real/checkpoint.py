"""The published checkpoint layout of ``bosonai/higgs-tts-3-4b``, read and checked in one pass.

A ``--weights DIR`` directory in the Hugging Face layout holds:

- ``config.json``: ``model_type: higgs_multimodal_qwen3`` with ``text_config`` (the Qwen3
  backbone; ``rope_theta: null`` means the Qwen3 default 1e6) and ``audio_encoder_config``
  (``encoder_type: discrete``, ``num_codebooks``, ``vocab_size`` = codes + BOC + EOC,
  ``tie_word_embeddings``);
- ``model.safetensors`` or shards with ``model.safetensors.index.json``: ``body.layers.N.*``,
  ``body.norm.weight``, ``tied.embedding.text_embedding.weight``, the fused audio embedding
  ``tied.embedding.modality_embeddings.0.embedding.weight`` ``[num_codebooks * vocab, hidden]``
  (also the audio head when tied, else ``tied.head.modality_heads.0.weight``), and the audio
  tokenizer's own weights under ``tied.embedding.modality_embeddings.0.model.``;
- ``tokenizer.json`` (with the ``<|tts|>``, ``<|ref_audio|>``, ``<|text|>``, ``<|audio|>`` and
  optionally ``<|ref_text|>`` added tokens);
- optionally ``audio_tokenizer/``: a Higgs Audio v2 tokenizer ``config.json`` and its own
  ``model.safetensors``, which then take precedence. The published checkpoint carries the
  codec's weights but not its config; without ``audio_tokenizer/config.json`` omni uses the
  published tokenizer's configuration (``PUBLISHED_CODEC_CONFIG``).

Every problem is collected and raised at once as one ``CheckpointError`` naming the file, the
key and the fix, before any module is built.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from omni_models.common.weights import CheckpointError

MODEL_TYPE = "higgs_multimodal_qwen3"
QWEN3_ROPE_THETA = 1_000_000.0
CODEC_PREFIX = "tied.embedding.modality_embeddings.0.model."
AUDIO_EMBEDDING = "tied.embedding.modality_embeddings.0.embedding.weight"
AUDIO_HEAD = "tied.head.modality_heads.0.weight"
TEXT_EMBEDDING = "tied.embedding.text_embedding.weight"
BODY_PREFIX = "body."
SPECIAL_TOKENS = ("<|tts|>", "<|ref_audio|>", "<|text|>", "<|audio|>")
INDEX_FILE = "model.safetensors.index.json"
CODEC_CONFIG_FILE = "audio_tokenizer/config.json"

#: The published Higgs Audio v2 tokenizer's configuration (bosonai/higgs-audio-v2-tokenizer):
#: 24 kHz, DAC strides 8*5*4*2*3 = 960 samples per frame (25 frames/s), 8 codebooks of 1024
#: (2 kbps / (10 bits * 25 Hz)), semantic features from a HuBERT-base at 16 kHz, every 2nd frame.
PUBLISHED_CODEC_CONFIG: dict[str, Any] = {
    "model_type": "higgs_audio_v2_tokenizer", "sample_rate": 24000, "semantic_sample_rate": 16000, "downsample_factor": 320,
    "target_bandwidths": [0.5, 1, 1.5, 2], "codebook_size": 1024, "codebook_dim": 64, "kernel_size": 3, "unit_kernel_size": 3,
    "channel_ratios": [1, 1], "strides": [1, 1], "block_dilations": [1, 1],
    "acoustic_model_config": {"model_type": "dac", "encoder_hidden_size": 64, "decoder_hidden_size": 1024, "hidden_size": 256,
                              "downsampling_ratios": [8, 5, 4, 2, 3], "upsampling_ratios": [8, 5, 4, 2, 3]},
    "semantic_model_config": {"model_type": "hubert", "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                              "num_attention_heads": 12, "conv_dim": [512] * 7, "conv_kernel": [10, 3, 3, 3, 3, 2, 2],
                              "conv_stride": [5, 2, 2, 2, 2, 2, 2], "conv_bias": False, "feat_extract_norm": "group",
                              "do_stable_layer_norm": False, "num_conv_pos_embeddings": 128, "num_conv_pos_embedding_groups": 16,
                              "layer_norm_eps": 1e-5},
}


@dataclass(frozen=True)
class BackboneShape:
    """The Qwen3 backbone's hyper-parameters (``text_config``)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    rms_eps: float
    rope_theta: float
    max_positions: int


@dataclass(frozen=True)
class AudioShape:
    """The discrete audio modality (``audio_encoder_config``): codes ``0..vocab-3``, then BOC and EOC."""

    num_codebooks: int
    vocab: int
    tied: bool

    @property
    def boc(self) -> int:
        return self.vocab - 2

    @property
    def eoc(self) -> int:
        return self.vocab - 1


class _Problems:
    def __init__(self, root: Path):
        self.root = root
        self.lines: list[str] = []

    def add(self, file: str, key: str, rule: str, fix: str) -> None:
        self.lines.append(f"{self.root / file}: {key}\n  rule: {rule}\n  fix:  {fix}")

    def raise_if_any(self) -> None:
        if self.lines:
            raise CheckpointError(f"--weights {self.root} is not a bosonai/higgs-tts-3-4b checkpoint:\n" + "\n".join(self.lines))


def _read_json(root: Path, name: str, problems: _Problems, fix: str) -> dict[str, Any] | None:
    path = root / name
    if not path.is_file():
        problems.add(name, "(file)", "the file is missing", fix)
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.add(name, "(file)", f"not readable JSON ({exc})", fix)
        return None
    if not isinstance(value, dict):
        problems.add(name, "(file)", "the top level must be a JSON object", fix)
        return None
    return value


def _int(section: dict[str, Any], key: str, where: str, problems: _Problems, default: Any = None) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        problems.add("config.json", f"{where}.{key}", f"a positive integer, got {value!r}", "use the config.json published with the checkpoint")
        return 1
    return value


def _backbone_shape(text: dict[str, Any], problems: _Problems) -> BackboneShape:
    if text.get("model_type", "qwen3") != "qwen3":
        problems.add("config.json", "text_config.model_type", f"the backbone must be qwen3, got {text.get('model_type')!r}", "this loader serves the Qwen3-backbone Higgs-TTS checkpoints only")
    hidden = _int(text, "hidden_size", "text_config", problems)
    heads = _int(text, "num_attention_heads", "text_config", problems)
    kv_heads = _int(text, "num_key_value_heads", "text_config", problems, heads)
    head_dim = text.get("head_dim") or max(1, hidden // heads)
    if heads % kv_heads:
        problems.add("config.json", "text_config.num_key_value_heads", f"{kv_heads} must divide num_attention_heads {heads}", "use the config.json published with the checkpoint")
    theta = text.get("rope_theta")
    return BackboneShape(
        hidden=hidden,
        layers=_int(text, "num_hidden_layers", "text_config", problems),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=int(head_dim),
        intermediate=_int(text, "intermediate_size", "text_config", problems),
        vocab=_int(text, "vocab_size", "text_config", problems),
        rms_eps=float(text.get("rms_norm_eps", 1e-6)),
        rope_theta=float(theta) if theta is not None else QWEN3_ROPE_THETA,
        max_positions=_int(text, "max_position_embeddings", "text_config", problems, 40960),
    )


def _audio_shape(audio: dict[str, Any], problems: _Problems) -> AudioShape:
    if audio.get("encoder_type", "discrete") != "discrete":
        problems.add("config.json", "audio_encoder_config.encoder_type", f"TTS uses the discrete audio encoder, got {audio.get('encoder_type')!r}", "pass the TTS checkpoint (bosonai/higgs-tts-3-4b), not an ASR one")
    return AudioShape(
        num_codebooks=_int(audio, "num_codebooks", "audio_encoder_config", problems),
        vocab=_int(audio, "vocab_size", "audio_encoder_config", problems),
        tied=bool(audio.get("tie_word_embeddings", True)),
    )


def _weight_map(root: Path, problems: _Problems) -> dict[str, Path]:
    """Tensor name -> the safetensors file holding it (sharded with an index, or one file)."""
    index = root / INDEX_FILE
    if index.is_file():
        data = _read_json(root, INDEX_FILE, problems, "restore the index published with the shards")
        mapping = (data or {}).get("weight_map")
        if not isinstance(mapping, dict):
            problems.add(INDEX_FILE, "weight_map", "an object mapping tensor names to shard files", "restore the index published with the shards")
            return {}
        missing = sorted({str(f) for f in mapping.values() if not (root / str(f)).is_file()})
        for name in missing:
            problems.add(name, "(file)", f"the shard is listed in {INDEX_FILE} but missing", "download every shard the index lists")
        return {name: root / str(f) for name, f in mapping.items() if str(f) not in missing}
    single = root / "model.safetensors"
    if not single.is_file():
        problems.add("model.safetensors", "(file)", f"neither model.safetensors nor {INDEX_FILE} is present", "download the checkpoint's safetensors files into the directory")
        return {}
    with safe_open(str(single), framework="pt") as handle:
        return dict.fromkeys(handle.keys(), single)  # noqa: SIM118 - safe_open is not a dict


@dataclass(frozen=True)
class HiggsCheckpoint:
    """A checked checkpoint directory: shapes, where each tensor lives, and the codec's config."""

    root: Path
    backbone: BackboneShape
    audio: AudioShape
    weight_map: dict[str, Path]
    codec_config: dict[str, Any]
    codec_files: tuple[Path, ...]

    @property
    def codec_config_source(self) -> str:
        path = self.root / CODEC_CONFIG_FILE
        return str(path) if path.exists() else "the published tokenizer configuration (built in; no audio_tokenizer/config.json)"

    @classmethod
    def open(cls, directory: str | Path) -> HiggsCheckpoint:
        root = Path(directory)
        problems = _Problems(root)
        if not root.is_dir():
            problems.add("", "(directory)", "--weights must name a local checkpoint directory", "download bosonai/higgs-tts-3-4b and pass its directory")
            problems.raise_if_any()
        config = _read_json(root, "config.json", problems, "download config.json with the checkpoint") or {}
        if config and config.get("model_type") != MODEL_TYPE:
            problems.add("config.json", "model_type", f"expected {MODEL_TYPE!r}, got {config.get('model_type')!r}", "pass the bosonai/higgs-tts-3-4b checkpoint directory")
        for key in ("text_config", "audio_encoder_config"):
            if config and not isinstance(config.get(key), dict):
                problems.add("config.json", key, "an object is required", "use the config.json published with the checkpoint")
        backbone = _backbone_shape(config.get("text_config") or {}, problems)
        audio = _audio_shape(config.get("audio_encoder_config") or {}, problems)
        tokenizer = _read_json(root, "tokenizer.json", problems, "download tokenizer.json with the checkpoint")
        if tokenizer is not None:
            added = {t.get("content") for t in tokenizer.get("added_tokens", []) if isinstance(t, dict)}
            for token in SPECIAL_TOKENS:
                if token not in added:
                    problems.add("tokenizer.json", f"added_tokens[{token}]", "the Higgs TTS prompt needs this special token", "use the tokenizer.json published with the checkpoint")
        codec_config = PUBLISHED_CODEC_CONFIG
        if (root / CODEC_CONFIG_FILE).exists():
            codec_config = _read_json(root, CODEC_CONFIG_FILE, problems, "fix the file, or remove it to use the published tokenizer configuration") or {}
        if codec_config and config:
            from .codec import CodecShape

            quantizers = CodecShape.from_config(codec_config).num_quantizers
            if quantizers != audio.num_codebooks:
                problems.add("config.json", "audio_encoder_config.num_codebooks", f"{audio.num_codebooks}, but the audio tokenizer has {quantizers} codebooks",
                             "use the config.json published with the checkpoint, or the tokenizer config that belongs to it")
        weight_map = _weight_map(root, problems)
        codec_files = tuple(sorted((root / "audio_tokenizer").glob("*.safetensors")))
        if weight_map:
            _check_tensors(weight_map, backbone, audio, bool(codec_files), problems)
        problems.raise_if_any()
        return cls(root, backbone, audio, weight_map, codec_config, codec_files)

    def tensors(self, prefix: str, strip: bool = True) -> dict[str, torch.Tensor]:
        """Every tensor whose name starts with ``prefix`` (prefix removed when ``strip``)."""
        by_file: dict[Path, list[str]] = {}
        for name, path in self.weight_map.items():
            if name.startswith(prefix):
                by_file.setdefault(path, []).append(name)
        out: dict[str, torch.Tensor] = {}
        for path, names in by_file.items():
            with safe_open(str(path), framework="pt") as handle:
                for name in names:
                    out[name[len(prefix) :] if strip else name] = handle.get_tensor(name)
        return out

    def codec_tensors(self) -> dict[str, torch.Tensor]:
        """The audio tokenizer's weights: its own directory's safetensors, else the bundled copy."""
        if self.codec_files:
            out: dict[str, torch.Tensor] = {}
            for path in self.codec_files:
                with safe_open(str(path), framework="pt") as handle:
                    for name in handle.keys():  # noqa: SIM118 - safe_open is not a dict
                        out[name] = handle.get_tensor(name)
            return out
        return self.tensors(CODEC_PREFIX)


def _check_tensors(weight_map: dict[str, Path], backbone: BackboneShape, audio: AudioShape, codec_apart: bool, problems: _Problems) -> None:
    file = INDEX_FILE if any(p.name != "model.safetensors" for p in weight_map.values()) else "model.safetensors"
    required = [TEXT_EMBEDDING, AUDIO_EMBEDDING, f"{BODY_PREFIX}norm.weight"]
    if not audio.tied:
        required.append(AUDIO_HEAD)
    for layer in range(backbone.layers):
        base = f"{BODY_PREFIX}layers.{layer}."
        required += [base + s for s in ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                        "self_attn.q_norm.weight", "self_attn.k_norm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                                        "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight")]
    missing = [name for name in required if name not in weight_map]
    for name in missing[:8]:
        problems.add(file, name, "the tensor is missing", "download the complete checkpoint (every shard) or fix config.json's text_config/audio_encoder_config")
    if len(missing) > 8:
        problems.add(file, f"... {len(missing) - 8} more", "tensors are missing", "download the complete checkpoint")
    if not codec_apart and not any(name.startswith(CODEC_PREFIX) for name in weight_map):
        problems.add(file, CODEC_PREFIX + "*", "no audio tokenizer weights are bundled and audio_tokenizer/ holds no *.safetensors",
                     "use the published checkpoint (it bundles the codec) or put the tokenizer's model.safetensors in audio_tokenizer/")
