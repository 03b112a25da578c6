"""Parity helpers: tiny random Qwen3-TTS 12 Hz checkpoints written by the reference package
(``qwen-tts``) in the published layout, and the reference's own generation and decoding.

Only the ``parity`` nox session has ``qwen-tts`` (installed ``--no-deps`` with transformers
4.57.3). ``qwen_tts`` imports its 25 Hz tokenizer's ``sox``, ``onnxruntime`` and
``torchaudio.compliance.kaldi`` at package import although the 12 Hz path never calls them, and
PyPI's torchaudio cannot load next to torch 2.13: ``install_import_shim`` registers empty
stand-ins for exactly those three modules, test-only, before the import.
"""

from __future__ import annotations

import importlib.machinery
import json
import sys
import types
from pathlib import Path

import torch

CODEBOOK = 64
GROUPS = 8
TALKER_VOCAB = CODEBOOK + 1024  # the reference suppresses the top 1024 ids except EOS
C = CODEBOOK
CODEC_IDS = {
    "codec_pad_id": C + 100, "codec_bos_id": C + 101, "codec_eos_token_id": C + 102, "codec_think_id": C + 106,
    "codec_nothink_id": C + 107, "codec_think_bos_id": C + 108, "codec_think_eos_id": C + 109,
}
LANGUAGES = {"english": C + 2, "chinese": C + 3, "german": C + 4, "beijing_dialect": C + 5}
SPEAKERS = {"vivian": C + 500, "dylan": C + 501, "eric": C + 502}
DIALECTS = {"vivian": False, "dylan": "beijing_dialect", "eric": False}
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>"]
WORDS = ["assistant", "user", "hello", "the", "voice"]


def install_import_shim() -> None:
    """Empty stand-ins for the 25 Hz tokenizer's imports (never called on the 12 Hz path).

    transformers is imported first so its own optional-package probe sees no torchaudio."""
    import transformers  # noqa: F401

    for name in ("sox", "onnxruntime", "torchaudio", "torchaudio.compliance", "torchaudio.compliance.kaldi"):
        if name not in sys.modules:
            stub = types.ModuleType(name)
            stub.__spec__ = importlib.machinery.ModuleSpec(name, loader=None)
            sys.modules[name] = stub
    sys.modules["torchaudio"].compliance = sys.modules["torchaudio.compliance"]
    sys.modules["torchaudio.compliance"].kaldi = sys.modules["torchaudio.compliance.kaldi"]


def _byte_symbols() -> list[str]:
    """GPT-2's printable stand-ins for the 256 byte values (the byte-level BPE alphabet)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, n = keep[:], 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    table = dict(zip(keep, chars))
    return [chr(table[b]) for b in range(256)]


def write_tokenizer(directory: Path) -> int:
    """vocab.json (bytes + merges spelling a few words), merges.txt, tokenizer_config.json; returns the text vocab size."""
    symbols = _byte_symbols()
    vocab = {s: i for i, s in enumerate(symbols)}
    merges = []
    for word in WORDS:
        current = word[0]
        for ch in word[1:]:
            merges.append(f"{current} {ch}")
            current += ch
            vocab.setdefault(current, len(vocab))
    merges = list(dict.fromkeys(merges))
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    added = {str(len(vocab) + i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True} for i, t in enumerate(SPECIAL_TOKENS)}
    config = {
        "add_prefix_space": False, "added_tokens_decoder": added, "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "errors": "replace", "model_max_length": 32768, "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
        "clean_up_tokenization_spaces": False,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return len(vocab) + len(SPECIAL_TOKENS)


def _special_id(directory: Path, token: str) -> int:
    config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    return next(int(k) for k, v in config["added_tokens_decoder"].items() if v["content"] == token)


def _randomise(module: torch.nn.Module, seed: int) -> None:
    """Weights large enough that greedy decisions are far from ties (the reference's init is tiny)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("cluster_usage"):
                p.copy_(torch.rand(p.shape, generator=gen) * 1.5 + 0.5)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(("alpha", "beta")):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * (0.3 if p.dim() < 2 else 1.0 / max(1.0, p.shape[-1] ** 0.5) * (3 if "conv" in name else 1)))


def _scale_output(decoder: torch.nn.Module, seed: int, groups: int) -> None:
    """Scale the last conv so random codes give audio of std ~0.2, away from the [-1, 1] clamp."""
    probe = torch.randint(0, CODEBOOK, (2, groups, 30), generator=torch.Generator().manual_seed(seed))
    last = decoder.decoder[-1]
    seen = []
    hook = last.register_forward_hook(lambda _m, _i, out: seen.append(out))
    with torch.no_grad():
        last.conv.bias.zero_()
        decoder(probe)
        last.conv.weight.mul_(0.2 / float(seen[0].std()))
    hook.remove()


def write_checkpoint(directory: Path, variant: str, *, size: str = "1b7", hidden: int = 32, layers: int = 2, seed: int = 0,
                     predictor_hidden: int = 24, text_hidden: int = 48, heads: int = 4, codec_hidden: int = 32,
                     groups: int = GROUPS, predictor_layers: int = 1, decoder_dim: int = 64) -> Path:
    """A random checkpoint of ``variant`` (base | custom_voice | voice_design) in the published layout."""
    install_import_shim()
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model

    directory.mkdir(parents=True, exist_ok=True)
    text_vocab = write_tokenizer(directory)
    head_dim = hidden // heads
    talker = dict(
        vocab_size=TALKER_VOCAB, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=heads // 2, head_dim=head_dim, text_vocab_size=text_vocab, text_hidden_size=text_hidden, num_code_groups=groups,
        rope_scaling={"interleaved": True, "mrope_section": [head_dim // 4, head_dim // 8, head_dim // 8], "rope_type": "default", "type": "default"},
        spk_id=SPEAKERS if variant == "custom_voice" else {}, spk_is_dialect=DIALECTS if variant == "custom_voice" else {},
        codec_language_id=LANGUAGES, max_position_embeddings=4096, hidden_act="silu",
        code_predictor_config=dict(vocab_size=CODEBOOK, hidden_size=predictor_hidden, intermediate_size=2 * predictor_hidden, num_hidden_layers=predictor_layers,
                                   num_attention_heads=heads, num_key_value_heads=heads // 2, head_dim=predictor_hidden // heads,
                                   num_code_groups=groups, max_position_embeddings=64),
        **CODEC_IDS,
    )
    speaker = dict(mel_dim=128, enc_dim=hidden, enc_channels=[32, 32, 32, 32, 96], enc_kernel_sizes=[5, 3, 3, 3, 1], enc_dilations=[1, 2, 3, 4, 1],
                   enc_attention_channels=16, enc_res2net_scale=4, enc_se_channels=16, sample_rate=24000)
    config = Qwen3TTSConfig(
        talker_config=talker, speaker_encoder_config=speaker, tokenizer_type="qwen3_tts_tokenizer_12hz", tts_model_size=size, tts_model_type=variant,
        im_start_token_id=_special_id(directory, "<|im_start|>"), im_end_token_id=_special_id(directory, "<|im_end|>"),
        tts_pad_token_id=_special_id(directory, "<tts_pad>"), tts_bos_token_id=_special_id(directory, "<tts_text_bos>"),
        tts_eos_token_id=_special_id(directory, "<tts_text_eod>"),
    )
    config.architectures = ["Qwen3TTSForConditionalGeneration"]
    torch.manual_seed(seed)
    model = Qwen3TTSForConditionalGeneration(config)
    _randomise(model, seed)
    model.save_pretrained(str(directory), safe_serialization=True)
    # the speaker encoder's config class takes only its own fields (the published file holds just those)
    written = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    written["speaker_encoder_config"] = {k: written["speaker_encoder_config"][k] for k in speaker}
    (directory / "config.json").write_text(json.dumps(written, indent=2), encoding="utf-8")
    generation = {"do_sample": True, "top_k": 50, "top_p": 1.0, "temperature": 0.9, "repetition_penalty": 1.05, "subtalker_dosample": True,
                  "subtalker_top_k": 50, "subtalker_top_p": 1.0, "subtalker_temperature": 0.9, "max_new_tokens": 8192}
    (directory / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    codec_dir = directory / "speech_tokenizer"
    codec_config = Qwen3TTSTokenizerV2Config(
        encoder_config=dict(hidden_size=codec_hidden, num_filters=8, num_residual_layers=1, upsampling_ratios=[8, 6, 5, 4], codebook_size=CODEBOOK,
                            codebook_dim=codec_hidden, num_quantizers=groups, vector_quantization_hidden_dimension=codec_hidden, num_semantic_quantizers=1,
                            upsample_groups=codec_hidden, num_hidden_layers=1, intermediate_size=2 * codec_hidden, num_attention_heads=4,
                            num_key_value_heads=4, head_dim=codec_hidden // 4, frame_rate=12.5, sliding_window=250),
        decoder_config=dict(codebook_size=CODEBOOK, hidden_size=codec_hidden, latent_dim=codec_hidden, codebook_dim=codec_hidden, num_attention_heads=4,
                            num_key_value_heads=4, num_hidden_layers=2, intermediate_size=2 * codec_hidden, num_quantizers=groups, sliding_window=72,
                            upsample_rates=[8, 5, 4, 3], upsampling_ratios=[2, 2], decoder_dim=decoder_dim),
        encoder_valid_num_quantizers=groups,
    )
    codec = Qwen3TTSTokenizerV2Model(codec_config)
    _randomise(codec.decoder, seed + 1)
    _scale_output(codec.decoder, seed, groups)
    codec.save_pretrained(str(codec_dir), safe_serialization=True)
    (codec_dir / "preprocessor_config.json").write_text(json.dumps({
        "feature_extractor_type": "EncodecFeatureExtractor", "feature_size": 1, "sampling_rate": 24000, "padding_side": "right",
        "padding_value": 0.0, "return_attention_mask": True, "chunk_length_s": None, "overlap": None}), encoding="utf-8")
    return directory


def load_reference(directory: Path):
    install_import_shim()
    from qwen_tts import Qwen3TTSModel

    return Qwen3TTSModel.from_pretrained(str(directory), dtype=torch.float32, attn_implementation="eager")
