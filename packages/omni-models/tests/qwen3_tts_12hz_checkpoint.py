"""Tiny random Qwen3-TTS 12 Hz checkpoints in the published layout, written with omni's own modules.

The default test sessions have no reference package; these checkpoints carry the same files and
keys (config.json sections, ``talker.*`` / ``speaker_encoder.*`` in model.safetensors, the
codec's ``decoder.*`` in speech_tokenizer/, a byte-level BPE tokenizer) so the stages, the
checkpoint checks and the CLI can be tested. The parity session proves the layout against the
reference's own writer.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from omni_models.qwen3_tts_12hz.codec import CodecDecoder
from omni_models.qwen3_tts_12hz.speaker import SpeakerEncoder
from omni_models.qwen3_tts_12hz.spec import read_codec_spec, read_model_spec
from omni_models.qwen3_tts_12hz.talker import Talker

C = 64
GROUPS = 8
SPEAKERS = {"vivian": C + 500, "dylan": C + 501}
LANGUAGES = {"english": C + 2, "chinese": C + 3, "beijing_dialect": C + 5}
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>"]


def _tokenizer(directory: Path) -> dict[str, int]:
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    vocab = {table[b]: b for b in range(256)}
    merges = []
    for word in ("assistant", "user"):
        current = word[0]
        for ch in word[1:]:
            merges.append(f"{current} {ch}")
            current += ch
            vocab.setdefault(current, len(vocab))
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    ids = {token: len(vocab) + i for i, token in enumerate(SPECIAL)}
    added = {str(i): {"content": t, "special": True, "normalized": False, "lstrip": False, "rstrip": False, "single_word": False} for t, i in ids.items()}
    (directory / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": added, "tokenizer_class": "Qwen2Tokenizer"}), encoding="utf-8")
    ids["_size"] = len(vocab) + len(SPECIAL)
    return ids


def _randomise(module: torch.nn.Module, seed: int, scale: float = 1.0) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("cluster_usage"):
                p.copy_(torch.rand(p.shape, generator=gen) + 0.5)
            elif name.endswith(("alpha", "beta")):
                p.zero_()
            elif p.dim() < 2:
                p.copy_(1.0 + 0.05 * torch.randn(p.shape, generator=gen) if "norm" in name else 0.05 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * scale / p[0].numel() ** 0.5)


def write_checkpoint(directory: Path, variant: str = "custom_voice", *, size: str = "1b7", seed: int = 0, hidden: int = 32) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    tokens = _tokenizer(directory)
    heads = 4
    config = {
        "architectures": ["Qwen3TTSForConditionalGeneration"], "model_type": "qwen3_tts", "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "tts_model_size": size, "tts_model_type": variant, "im_start_token_id": tokens["<|im_start|>"], "im_end_token_id": tokens["<|im_end|>"],
        "tts_pad_token_id": tokens["<tts_pad>"], "tts_bos_token_id": tokens["<tts_text_bos>"], "tts_eos_token_id": tokens["<tts_text_eod>"],
        "talker_config": {
            "vocab_size": C + 1024, "hidden_size": hidden, "intermediate_size": 2 * hidden, "num_hidden_layers": 2, "num_attention_heads": heads,
            "num_key_value_heads": 2, "head_dim": hidden // heads, "text_vocab_size": tokens["_size"], "text_hidden_size": 48, "num_code_groups": GROUPS,
            "rope_scaling": {"interleaved": True, "mrope_section": [2, 1, 1], "rope_type": "default"}, "rope_theta": 1000000, "rms_norm_eps": 1e-6,
            "codec_pad_id": C + 100, "codec_bos_id": C + 101, "codec_eos_token_id": C + 102, "codec_think_id": C + 106, "codec_nothink_id": C + 107,
            "codec_think_bos_id": C + 108, "codec_think_eos_id": C + 109, "codec_language_id": LANGUAGES,
            "spk_id": SPEAKERS if variant == "custom_voice" else {}, "spk_is_dialect": {"vivian": False, "dylan": "beijing_dialect"} if variant == "custom_voice" else {},
            "code_predictor_config": {"vocab_size": C, "hidden_size": 24, "intermediate_size": 48, "num_hidden_layers": 1, "num_attention_heads": heads,
                                      "num_key_value_heads": 2, "head_dim": 6, "num_code_groups": GROUPS},
        },
        "speaker_encoder_config": {"mel_dim": 128, "enc_dim": hidden, "enc_channels": [32, 32, 32, 32, 96], "enc_kernel_sizes": [5, 3, 3, 3, 1],
                                   "enc_dilations": [1, 2, 3, 4, 1], "enc_attention_channels": 16, "enc_res2net_scale": 4, "enc_se_channels": 16, "sample_rate": 24000},
    }
    (directory / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    (directory / "generation_config.json").write_text(json.dumps({"do_sample": True, "temperature": 0.9, "top_k": 50, "top_p": 1.0, "repetition_penalty": 1.05,
                                                                 "subtalker_dosample": True, "subtalker_temperature": 0.9, "subtalker_top_k": 50,
                                                                 "subtalker_top_p": 1.0, "max_new_tokens": 8192}), encoding="utf-8")
    codec_dir = directory / "speech_tokenizer"
    codec_dir.mkdir(exist_ok=True)
    (codec_dir / "config.json").write_text(json.dumps({
        "model_type": "qwen3_tts_tokenizer_12hz", "encoder_valid_num_quantizers": GROUPS, "input_sample_rate": 24000, "output_sample_rate": 24000,
        "decode_upsample_rate": 1920, "encode_downsample_rate": 1920, "encoder_config": {},
        "decoder_config": {"codebook_size": C, "hidden_size": 32, "latent_dim": 32, "codebook_dim": 32, "num_attention_heads": 4, "num_key_value_heads": 4,
                           "num_hidden_layers": 2, "intermediate_size": 64, "num_quantizers": GROUPS, "sliding_window": 72, "upsample_rates": [8, 5, 4, 3],
                           "upsampling_ratios": [2, 2], "decoder_dim": 64, "rms_norm_eps": 1e-5, "layer_scale_initial_scale": 0.01},
    }), encoding="utf-8")
    spec = read_model_spec(directory)
    talker = Talker(spec)
    _randomise(talker, seed, scale=2.0)
    tensors = {f"talker.{k}": v.contiguous() for k, v in talker.state_dict().items()}
    if spec.speaker_encoder is not None:
        speaker = SpeakerEncoder(spec.speaker_encoder)
        _randomise(speaker, seed + 1)
        tensors.update({f"speaker_encoder.{k}": v.contiguous() for k, v in speaker.state_dict().items()})
    save_file(tensors, str(directory / "model.safetensors"))
    decoder = CodecDecoder(read_codec_spec(directory))
    _randomise(decoder, seed + 2, scale=0.5)
    save_file({f"decoder.{k}": v.contiguous() for k, v in decoder.state_dict().items()}, str(codec_dir / "model.safetensors"))
    return directory


class EngineContext:
    """The stage context an engine test passes: never cancelled, no deadline."""

    cancelled = False
    deadline = None


def build_variants(root: Path, variants: tuple[str, ...]) -> dict[str, tuple]:
    """``{variant: (preprocessing stage, talker engine)}`` built from a tiny checkpoint of each variant under ``root``."""
    from omni_models.qwen3_tts_12hz import stages

    out = {}
    for variant in variants:
        directory = write_checkpoint(root / variant, variant)
        out[variant] = (stages.build_preprocessing(model_path=str(directory)), stages.build_tts_engine(model_path=str(directory)).engine)
    return out


def sine_wav(seconds: float = 0.5, rate: int = 16000) -> bytes:
    """A 220 Hz sine as 16-bit mono WAV bytes: a reference recording for cloning requests."""
    import io
    import wave

    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        t = torch.arange(int(seconds * rate)) / rate
        out.writeframes((torch.sin(2 * torch.pi * 220 * t) * 12000).to(torch.int16).numpy().tobytes())
    return buffer.getvalue()
