"""A speech request's fields for a Qwen3-TTS 12 Hz checkpoint, checked against its variant.

Fields (OpenAI body extensions, vLLM-Omni's names, the same as ``omni synthesize`` flags):
``voice`` (CustomVoice: a speaker of the checkpoint), ``instructions`` (CustomVoice 1.7B,
VoiceDesign), ``language`` (``auto`` or one the checkpoint lists), ``ref_audio`` + ``ref_text`` and
``x_vector_only_mode`` (Base), ``temperature`` (0 = greedy, talker and sub-talker), ``top_k``,
``top_p``, ``repetition_penalty``, ``max_new_tokens``, ``seed``, ``input_open`` (more text follows by
append, ``append.py``). Absent fields take the
checkpoint's ``generation_config.json`` defaults, as the reference does. Every problem is an
``InvalidRequest`` (HTTP 400) naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omni_models.common.limits import GenerationLimits
from omni_models.common.sampling import request_seed
from omni_models.common.voice_cache import VOICE_KEY
from omni_runtime.errors import InvalidRequest

from .sampling import Sampler
from .spec import VARIANTS, GenerationDefaults, ModelSpec

MAX_CHARS = 4000
MIN_NEW_TOKENS = 2  # the reference blocks EOS for the first two frames
#: Voices an OpenAI client may send to a checkpoint without named speakers (the field is required there).
NEUTRAL_VOICES = (None, "", "default")


@dataclass(frozen=True)
class RequestFields:
    text: str
    instructions: str | None
    language: str
    speaker: str | None
    ref_text: str | None
    x_vector_only: bool
    talker: Sampler
    sub: Sampler
    limits: GenerationLimits
    seed: int
    input_open: bool = False
    """More text follows through ``RequestHandle.append`` (``omni_models.qwen3_tts_12hz.append``)."""


def _number(data: dict[str, Any], name: str, low: float, high: float, default: float, *, integer: bool = False, low_open: bool = False) -> Any:
    value = data.get(name)
    if value is None:
        return default
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not (low < value if low_open else low <= value) or value > high:
        bound = f"{'>' if low_open else '>='} {low} and <= {high}"
        raise InvalidRequest(f"{name} must be {'an integer' if integer else 'a number'} {bound}, got {value!r}", param=name)
    return value


def _text(data: dict[str, Any], name: str, *, required: bool) -> str | None:
    value = data.get(name)
    if value is None or value == "":
        if required:
            raise InvalidRequest(f"{name} is required", param=name)
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a string, got {type(value).__name__}", param=name)
    if len(value) > MAX_CHARS:
        raise InvalidRequest(f"{name} is {len(value)} characters; the limit is {MAX_CHARS}", param=name)
    return value


def parse_request(data: dict[str, Any], spec: ModelSpec, defaults: GenerationDefaults, *, cap_frames: int) -> RequestFields:
    kind = VARIANTS[spec.variant]
    text = _text(data, "text", required=True)
    problems = []

    def refuse(param: str, message: str) -> None:
        problems.append(InvalidRequest(message, param=param))

    voice = data.get("voice")
    speaker = None
    if spec.variant == "custom_voice":
        if not isinstance(voice, str) or voice.lower() not in spec.speakers:
            refuse("voice", f"voice {voice!r} is not a speaker of this {kind} checkpoint; choose one of: {', '.join(sorted(spec.speakers))}")
        else:
            speaker = voice.lower()
    elif voice not in NEUTRAL_VOICES:
        refuse("voice", f"voice {voice!r}: the {kind} checkpoint has no named speakers; "
               + ("clone one with ref_audio + ref_text" if spec.variant == "base" else "describe the voice in instructions") + " (or send voice 'default')")
    instructions = _text(data, "instructions", required=False)
    if instructions is not None and (spec.variant == "base" or (spec.variant == "custom_voice" and "0b6" in spec.size)):
        refuse("instructions", f"the {spec.size or ''} {kind} checkpoint takes no instructions; drop the field".replace("  ", " "))
    language = data.get("language", "auto")
    if not isinstance(language, str) or language.lower() not in spec.supported_languages:
        refuse("language", f"language {language!r} is not one this checkpoint lists; choose one of: {', '.join(spec.supported_languages)}")
    ref_given = data.get("ref_audio") is not None or VOICE_KEY in data  # a voice_key: an uploaded voice (omni serve)
    ref_text = _text(data, "ref_text", required=False)
    x_only = data.get("x_vector_only_mode", False)
    if not isinstance(x_only, bool):
        refuse("x_vector_only_mode", f"x_vector_only_mode must be true or false, got {x_only!r}")
    if spec.variant == "base":
        if not ref_given:
            refuse("ref_audio", "the Base checkpoint clones a voice: send ref_audio (base64 WAV) with ref_text, or with x_vector_only_mode true")
        elif not x_only and ref_text is None:
            refuse("ref_text", "ref_text (the transcript of ref_audio) is required unless x_vector_only_mode is true")
    else:
        for name, given in (("ref_audio", ref_given), ("ref_text", ref_text is not None), ("x_vector_only_mode", bool(data.get("x_vector_only_mode")))):
            if given:
                refuse(name, f"{name} is for the Base checkpoints (voice cloning); the {kind} checkpoint does not take it")
    input_open = data.get("input_open", False)
    if not isinstance(input_open, bool):
        refuse("input_open", f"input_open must be true or false, got {input_open!r}")
    speed = data.get("speed", 1.0)
    if speed not in (None, 1, 1.0):
        refuse("speed", f"speed {speed!r}: Qwen3-TTS has no speed control; send 1.0 or omit it")
    if problems:
        raise problems[0] if len(problems) == 1 else InvalidRequest("; ".join(str(p) for p in problems), param=problems[0].param)
    temperature = _number(data, "temperature", 0, 10, defaults.temperature if defaults.do_sample else 0.0)
    greedy = temperature == 0
    top_k = _number(data, "top_k", 0, 1 << 20, defaults.top_k, integer=True)
    top_p = _number(data, "top_p", 0, 1, defaults.top_p, low_open=True)
    penalty = _number(data, "repetition_penalty", 0, 10, defaults.repetition_penalty, low_open=True)
    cap = min(cap_frames, defaults.max_new_tokens)
    max_new = _number(data, "max_new_tokens", MIN_NEW_TOKENS + 1, cap, cap, integer=True)
    sub_greedy = greedy or not defaults.subtalker_dosample
    return RequestFields(
        text=text, instructions=instructions, language=language.lower(), speaker=speaker, ref_text=ref_text, x_vector_only=bool(x_only),
        talker=Sampler(0.0 if greedy else float(temperature), top_k, float(top_p), float(penalty)),
        sub=Sampler(0.0 if sub_greedy else defaults.subtalker_temperature, defaults.subtalker_top_k, defaults.subtalker_top_p),
        limits=GenerationLimits(MIN_NEW_TOKENS, max_new), seed=request_seed(data), input_open=input_open,
    )
