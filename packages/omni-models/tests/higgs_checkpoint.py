"""Tiny Higgs-TTS checkpoints in the published layout (``bosonai/higgs-tts-3-4b``), for tests.

``write_checkpoint(dir, reference=True)`` builds the backbone with transformers' ``Qwen3Model``
and the codec with transformers' ``HiggsAudioV2TokenizerModel`` (the reference's own config
and model classes, random weights), and writes their tensors under the published names;
``reference=False`` writes the same layout from omni's own modules (no transformers needed).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from omni_models.higgs_tts_real.checkpoint import AUDIO_EMBEDDING, CODEC_PREFIX, TEXT_EMBEDDING

NUM_CODEBOOKS = 4
AUDIO_VOCAB = 34  # 32 codes + BOC + EOC
SPECIALS = ["<|tts|>", "<|ref_text|>", "<|ref_audio|>", "<|text|>", "<|audio|>", "<unk>"]
CORPUS = [
    "hello there, how are you today?", "the quick brown fox jumps over the lazy dog", "speech synthesis from text",
    "omni serves real checkpoints", "a reference voice is cloned", "numbers like 42 and 7 are read aloud",
]

TEXT_CONFIG: dict[str, Any] = {
    "model_type": "qwen3", "vocab_size": 320, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-6, "rope_theta": None, "tie_word_embeddings": False,
}


def codec_config() -> dict[str, Any]:
    """A tiny Higgs Audio v2 tokenizer config with the published rates: 24 kHz, hop 960 (25 frames/s),
    semantic features at 16 kHz through a HuBERT of total stride 320, every 2nd frame; 4 codebooks of 32."""
    return {
        "model_type": "higgs_audio_v2_tokenizer", "sample_rate": 24000, "semantic_sample_rate": 16000,
        "target_bandwidths": [0.25, 0.5], "codebook_size": 32, "codebook_dim": 8, "kernel_size": 3,
        "channel_ratios": [1, 1], "strides": [1, 1], "block_dilations": [1, 1], "unit_kernel_size": 3, "downsample_factor": 320,
        "acoustic_model_config": {"model_type": "dac", "encoder_hidden_size": 2, "downsampling_ratios": [8, 5, 4, 2, 3], "decoder_hidden_size": 64, "upsampling_ratios": [8, 5, 4, 2, 3], "hidden_size": 16},
        "semantic_model_config": {
            "model_type": "hubert", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32,
            "conv_dim": [16, 16, 16, 16], "conv_stride": [5, 4, 4, 4], "conv_kernel": [10, 8, 8, 8], "num_conv_pos_embeddings": 16,
            "num_conv_pos_embedding_groups": 4, "mask_time_prob": 0.0,
        },
    }


@dataclass(frozen=True)
class Written:
    root: Path
    audio_embedding: torch.Tensor
    reference_backbone: Any = None  # transformers Qwen3Model (reference=True)
    reference_codec: Any = None  # transformers HiggsAudioV2TokenizerModel (reference=True)


def _tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=TEXT_CONFIG["vocab_size"] - 16, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.save(str(path))


def _random_codebooks(state: dict[str, torch.Tensor], gen: torch.Generator) -> None:
    """The reference initialises codebooks to zeros (they are trained by EMA); give them values."""
    for key in list(state):
        if key.endswith("codebook.embed"):
            state[key] = torch.randn(state[key].shape, generator=gen)


def _init(name: str, shape: torch.Size, gen: torch.Generator) -> torch.Tensor:
    """Random codec weights of a sane scale: fan-in normalised weights, Snake alphas near 1."""
    noise = torch.randn(shape, generator=gen)
    if name.endswith(("alpha", "norm.weight")):
        return 1.0 + 0.1 * noise
    if name.endswith("codebook.embed"):
        return noise
    return noise / math.sqrt(math.prod(shape[1:])) if len(shape) > 1 else 0.01 * noise


def write_checkpoint(root: str | Path, *, reference: bool, seed: int = 0, tied: bool = True, shards: int = 1, eoc_boost: float = 1.0) -> Written:
    """``eoc_boost`` scales codebook 0's EOC row of the (tied) audio head, so that random weights end
    some requests by EOC (and its wind-down) before ``max_new_tokens``."""
    root = Path(root)
    (root / "audio_tokenizer").mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    audio_cfg = {"encoder_type": "discrete", "num_codebooks": NUM_CODEBOOKS, "vocab_size": AUDIO_VOCAB, "tie_word_embeddings": tied}
    config = {"model_type": "higgs_multimodal_qwen3", "architectures": ["HiggsMultimodalQwen3ForConditionalGeneration"],
              "audio_token_id": -100, "text_config": TEXT_CONFIG, "audio_encoder_config": audio_cfg}
    (root / "config.json").write_text(json.dumps(config, indent=1))
    (root / "audio_tokenizer" / "config.json").write_text(json.dumps(codec_config(), indent=1))
    _tokenizer(root / "tokenizer.json")
    hidden = TEXT_CONFIG["hidden_size"]
    audio_embedding = torch.randn(NUM_CODEBOOKS * AUDIO_VOCAB, hidden, generator=gen) * 0.5
    audio_embedding[AUDIO_VOCAB - 1] *= eoc_boost
    backbone_ref = codec_ref = None
    if reference:
        from transformers import HiggsAudioV2TokenizerConfig, HiggsAudioV2TokenizerModel, Qwen3Config, Qwen3Model

        cfg = {k: v for k, v in TEXT_CONFIG.items() if k not in ("model_type", "rope_theta")}
        backbone_ref = Qwen3Model(Qwen3Config(**cfg, rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0})).eval()
        body = {k: v.detach().clone() for k, v in backbone_ref.state_dict().items()}
        codec_ref = HiggsAudioV2TokenizerModel(HiggsAudioV2TokenizerConfig(**codec_config())).eval()
        codec_state = {k: v.detach().clone() for k, v in codec_ref.state_dict().items()}
        _random_codebooks(codec_state, gen)
        codec_ref.load_state_dict(codec_state)
    else:
        from omni_models.higgs_tts_real.backbone import HiggsBackbone
        from omni_models.higgs_tts_real.checkpoint import AudioShape, BackboneShape
        from omni_models.higgs_tts_real.codec import CodecShape, HiggsCodec

        shape = BackboneShape(hidden, TEXT_CONFIG["num_hidden_layers"], TEXT_CONFIG["num_attention_heads"], TEXT_CONFIG["num_key_value_heads"],
                              TEXT_CONFIG["head_dim"], TEXT_CONFIG["intermediate_size"], TEXT_CONFIG["vocab_size"], 1e-6, 1e6, 1024)
        own = HiggsBackbone(shape, AudioShape(NUM_CODEBOOKS, AUDIO_VOCAB, tied))
        for p in own.parameters():
            p.data = torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1])
        body = {("embed_tokens.weight" if k == "text_embedding.weight" else k): v for k, v in own.state_dict().items() if not k.startswith("audio_")}
        codec = HiggsCodec(CodecShape.from_config(codec_config()), codec_config()["semantic_model_config"])
        codec_state = {k: _init(k, v.shape, gen) for k, v in codec.state_dict().items()}
    tensors = {TEXT_EMBEDDING: body.pop("embed_tokens.weight"), AUDIO_EMBEDDING: audio_embedding}
    tensors.update({f"body.{k}": v for k, v in body.items()})
    if not tied:
        tensors["tied.head.modality_heads.0.weight"] = torch.randn(audio_embedding.shape, generator=gen) * 0.5
    tensors.update({CODEC_PREFIX + k: v for k, v in codec_state.items()})
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    if shards == 1:
        save_file(tensors, str(root / "model.safetensors"))
    else:
        names = sorted(tensors)
        weight_map = {}
        for i in range(shards):
            file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            part = names[i::shards]
            save_file({k: tensors[k] for k in part}, str(root / file))
            weight_map.update(dict.fromkeys(part, file))
        (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return Written(root, audio_embedding, backbone_ref, codec_ref)
