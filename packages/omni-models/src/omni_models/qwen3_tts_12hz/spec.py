"""What a Qwen3-TTS 12 Hz checkpoint declares: ``config.json``, ``generation_config.json`` and
``speech_tokenizer/config.json``, read into frozen values once.

Every missing or malformed field is a ``CheckpointError`` naming the file, the key and the fix,
raised before any stage is built (``omni_models.qwen3_tts_12hz.checkpoint.verify``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omni_models.common.checkpoint_error import CheckpointError as CommonCheckpointError
from omni_models.common.qwen3_layers import StackSpec

VARIANTS = {"base": "Base", "custom_voice": "CustomVoice", "voice_design": "VoiceDesign"}
TOKENIZER_TYPE = "qwen3_tts_tokenizer_12hz"


class CheckpointError(CommonCheckpointError):
    """A checkpoint directory that cannot be served: one line per problem, each with its fix
    (a :class:`~omni_runtime.errors.StageConfigError` on ``--weights``: exit 1, no traceback)."""


def read_json(directory: Path, name: str) -> dict[str, Any]:
    path = directory / name
    if not path.is_file():
        raise CheckpointError(f"{path}: missing\n  fix:  copy {name} from the published checkpoint into {directory}")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: not readable JSON ({exc})\n  fix:  re-download {name}") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: expected a JSON object\n  fix:  re-download {name}")
    return value


class _Fields:
    """Typed access to one JSON object, naming file and key in every error."""

    def __init__(self, path: Path, prefix: str, values: dict[str, Any]):
        self.path, self.prefix, self.values = path, prefix, values

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        if key not in self.values or self.values[key] is None:
            if default is ...:
                raise CheckpointError(f"{self.path}: key {self.prefix}{key} is missing\n  fix:  use the published config.json of this checkpoint")
            return default
        value = self.values[key]
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            raise CheckpointError(f"{self.path}: key {self.prefix}{key} is {value!r}, expected {getattr(kind, '__name__', kind)}\n  fix:  use the published config.json")
        return value

    def section(self, key: str) -> _Fields:
        return _Fields(self.path, f"{self.prefix}{key}.", self.get(key, dict))


def _stack(fields: _Fields) -> StackSpec:
    hidden, heads = fields.get("hidden_size", int), fields.get("num_attention_heads", int)
    act = fields.get("hidden_act", str, "silu")
    if act != "silu":
        raise CheckpointError(f"{fields.path}: key {fields.prefix}hidden_act is {act!r}; the published checkpoints (and omni) use 'silu'\n  fix:  use the published config.json")
    rope = fields.get("rope_scaling", dict, {}) or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        raise CheckpointError(f"{fields.path}: key {fields.prefix}rope_scaling.rope_type is {rope.get('rope_type')!r}; omni implements the published 'default'\n  fix:  use the published config.json")
    return StackSpec(
        hidden=hidden,
        intermediate=fields.get("intermediate_size", int),
        layers=fields.get("num_hidden_layers", int),
        heads=heads,
        kv_heads=fields.get("num_key_value_heads", int, heads),
        head_dim=fields.get("head_dim", int, hidden // heads),
        eps=float(fields.get("rms_norm_eps", (int, float), 1e-6)),
        rope_theta=float(fields.get("rope_theta", (int, float), 10000)),
        bias=fields.get("attention_bias", bool, False),
    )


@dataclass(frozen=True)
class CodecIds:
    """Special ids of the talker's codec vocabulary (``talker_config.codec_*_id``)."""

    eos: int
    think: int
    nothink: int
    think_bos: int
    think_eos: int
    pad: int
    bos: int


@dataclass(frozen=True)
class TextIds:
    """Special ids of the text vocabulary (``tts_*_token_id``)."""

    tts_pad: int
    tts_bos: int
    tts_eos: int


@dataclass(frozen=True)
class SpeakerSpec:
    mel_dim: int
    enc_dim: int
    channels: tuple[int, ...]
    kernel_sizes: tuple[int, ...]
    dilations: tuple[int, ...]
    attention_channels: int
    res2net_scale: int
    se_channels: int
    sample_rate: int


@dataclass(frozen=True)
class ModelSpec:
    """``config.json`` of a Qwen3-TTS 12 Hz checkpoint."""

    variant: str  # tts_model_type: base | custom_voice | voice_design
    size: str
    talker: StackSpec
    predictor: StackSpec
    num_code_groups: int
    codec_vocab: int
    predictor_vocab: int
    text_vocab: int
    text_hidden: int
    codec: CodecIds
    text: TextIds
    speakers: dict[str, int] = field(hash=False)
    dialects: dict[str, Any] = field(hash=False)
    languages: dict[str, int] = field(hash=False)
    speaker_encoder: SpeakerSpec | None = None

    @property
    def supported_languages(self) -> list[str]:
        return ["auto", *[name for name in self.languages if "dialect" not in name]]


def read_model_spec(directory: Path) -> ModelSpec:
    path = directory / "config.json"
    top = _Fields(path, "", read_json(directory, "config.json"))
    kind = top.get("tokenizer_type", str, TOKENIZER_TYPE)
    if kind != TOKENIZER_TYPE:
        raise CheckpointError(f"{path}: key tokenizer_type is {kind!r}; omni serves the 12 Hz family ({TOKENIZER_TYPE})\n  fix:  use a Qwen3-TTS-12Hz checkpoint")
    variant = top.get("tts_model_type", str)
    if variant not in VARIANTS:
        raise CheckpointError(f"{path}: key tts_model_type is {variant!r}, expected one of {sorted(VARIANTS)}\n  fix:  use the published config.json")
    talker = top.section("talker_config")
    predictor = talker.section("code_predictor_config")
    groups = talker.get("num_code_groups", int)
    if predictor.get("num_code_groups", int, groups) != groups:
        raise CheckpointError(f"{path}: talker_config.code_predictor_config.num_code_groups differs from talker_config.num_code_groups\n  fix:  use the published config.json")
    speaker = None
    if variant == "base":
        s = top.section("speaker_encoder_config")
        speaker = SpeakerSpec(
            mel_dim=s.get("mel_dim", int, 128), enc_dim=s.get("enc_dim", int, 1024),
            channels=tuple(s.get("enc_channels", list, [512, 512, 512, 512, 1536])),
            kernel_sizes=tuple(s.get("enc_kernel_sizes", list, [5, 3, 3, 3, 1])),
            dilations=tuple(s.get("enc_dilations", list, [1, 2, 3, 4, 1])),
            attention_channels=s.get("enc_attention_channels", int, 128), res2net_scale=s.get("enc_res2net_scale", int, 8),
            se_channels=s.get("enc_se_channels", int, 128), sample_rate=s.get("sample_rate", int, 24000),
        )
    return ModelSpec(
        variant=variant,
        size=top.get("tts_model_size", str, ""),
        talker=_stack(talker),
        predictor=_stack(predictor),
        num_code_groups=groups,
        codec_vocab=talker.get("vocab_size", int),
        predictor_vocab=predictor.get("vocab_size", int),
        text_vocab=talker.get("text_vocab_size", int),
        text_hidden=talker.get("text_hidden_size", int),
        codec=CodecIds(
            eos=talker.get("codec_eos_token_id", int), think=talker.get("codec_think_id", int), nothink=talker.get("codec_nothink_id", int),
            think_bos=talker.get("codec_think_bos_id", int), think_eos=talker.get("codec_think_eos_id", int),
            pad=talker.get("codec_pad_id", int), bos=talker.get("codec_bos_id", int),
        ),
        text=TextIds(tts_pad=top.get("tts_pad_token_id", int), tts_bos=top.get("tts_bos_token_id", int), tts_eos=top.get("tts_eos_token_id", int)),
        speakers={k.lower(): v for k, v in (talker.get("spk_id", dict, {}) or {}).items()},
        dialects={k.lower(): v for k, v in (talker.get("spk_is_dialect", dict, {}) or {}).items()},
        languages={k.lower(): v for k, v in talker.get("codec_language_id", dict).items()},
        speaker_encoder=speaker,
    )


@dataclass(frozen=True)
class GenerationDefaults:
    """``generation_config.json``: the reference's per-checkpoint sampling defaults."""

    do_sample: bool = True
    top_k: int = 50
    top_p: float = 1.0
    temperature: float = 0.9
    repetition_penalty: float = 1.05
    subtalker_dosample: bool = True
    subtalker_top_k: int = 50
    subtalker_top_p: float = 1.0
    subtalker_temperature: float = 0.9
    max_new_tokens: int = 2048


def read_generation_defaults(directory: Path) -> GenerationDefaults:
    values = read_json(directory, "generation_config.json")
    fields = _Fields(directory / "generation_config.json", "", values)
    base = GenerationDefaults()
    kinds = {"do_sample": bool, "subtalker_dosample": bool, "top_k": int, "subtalker_top_k": int, "max_new_tokens": int}
    chosen = {}
    for name in base.__dataclass_fields__:
        kind = kinds.get(name, (int, float))
        chosen[name] = fields.get(name, kind, getattr(base, name))
    return GenerationDefaults(**chosen)


@dataclass(frozen=True)
class CodecSpec:
    """``speech_tokenizer/config.json``: the 12 Hz codec's decoder (and encoder, for cloning)."""

    sample_rate: int
    input_sample_rate: int
    upsample: int
    downsample: int
    valid_quantizers: int
    codebook_size: int
    codebook_dim: int
    num_quantizers: int
    latent_dim: int
    decoder_dim: int
    upsample_rates: tuple[int, ...]
    upsampling_ratios: tuple[int, ...]
    transformer: StackSpec
    sliding_window: int
    layer_scale: float
    encoder_config: dict[str, Any] = field(hash=False, compare=False)


def read_codec_spec(directory: Path) -> CodecSpec:
    sub = directory / "speech_tokenizer"
    top = _Fields(sub / "config.json", "", read_json(sub, "config.json"))
    dec = top.section("decoder_config")
    hidden, heads = dec.get("hidden_size", int), dec.get("num_attention_heads", int)
    transformer = StackSpec(
        hidden=hidden, intermediate=dec.get("intermediate_size", int), layers=dec.get("num_hidden_layers", int), heads=heads,
        kv_heads=dec.get("num_key_value_heads", int, heads), head_dim=dec.get("head_dim", int, hidden // heads),
        eps=float(dec.get("rms_norm_eps", (int, float), 1e-5)), rope_theta=float(dec.get("rope_theta", (int, float), 10000)),
        bias=dec.get("attention_bias", bool, False),
    )
    return CodecSpec(
        sample_rate=top.get("output_sample_rate", int, 24000),
        input_sample_rate=top.get("input_sample_rate", int, 24000),
        upsample=top.get("decode_upsample_rate", int, 1920),
        downsample=top.get("encode_downsample_rate", int, 1920),
        valid_quantizers=top.get("encoder_valid_num_quantizers", int, 16),
        codebook_size=dec.get("codebook_size", int),
        codebook_dim=dec.get("codebook_dim", int),
        num_quantizers=dec.get("num_quantizers", int),
        latent_dim=dec.get("latent_dim", int),
        decoder_dim=dec.get("decoder_dim", int),
        upsample_rates=tuple(dec.get("upsample_rates", list)),
        upsampling_ratios=tuple(dec.get("upsampling_ratios", list)),
        transformer=transformer,
        sliding_window=dec.get("sliding_window", int, 72),
        layer_scale=float(dec.get("layer_scale_initial_scale", (int, float), 0.01)),
        encoder_config=top.get("encoder_config", dict, {}),
    )
