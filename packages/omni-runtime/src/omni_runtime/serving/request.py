"""Validation of ``POST /v1/audio/speech`` bodies into the entry payload.

One pydantic model (:class:`SpeechBody`) holds every field the server or a
bundled model reads, with its type and range; fields it does not know are still
passed to the entry stage (custom pipelines read their own), but only as
bounded JSON: 64-bit integers, finite floats, valid Unicode, nesting at most
:data:`MAX_EXTRA_DEPTH` deep. The JSON parser itself refuses the inputs that
would otherwise surface later as a 500 or a misleading 503: numbers of
thousands of digits, 30,000-deep nesting, ``NaN``. Every rejection is an
:class:`APIError` carrying OpenAI's ``param`` and ``code``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError, field_validator, model_validator

from .audio import AUDIO_FORMATS, wav_problem
from .errors import APIError, bad_request

DEFAULT_MAX_INPUT_CHARS = 4096
"""OpenAI's own limit for ``input``."""
DEFAULT_MAX_BODY_BYTES = 64 * 1024
"""Enough for 4096 characters JSON-escaped as ``\\uXXXX`` plus the other fields; raise it
(``--max-body-bytes``) to accept ``ref_audio`` recordings longer than about a second."""
MIN_SPEED, MAX_SPEED = 0.25, 4.0
MAX_INT_DIGITS = 40
"""Longest integer literal parsed; fields then check their own range (64-bit for extras)."""
MAX_EXTRA_DEPTH = 8
"""Deepest nesting accepted inside an extra field."""
INT64 = (-(2**63), 2**63 - 1)
_RESERVED = frozenset({"text", "request_id", "voice_key", "voices_dir"})
"""Extra fields that would overwrite what the runtime or the entry payload owns (``voice_key``/``voices_dir``: the server's voice cache)."""

Number = StrictInt | StrictFloat


class VoiceObject(BaseModel):
    """OpenAI's custom-voice form ``{"id": "..."}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: Annotated[StrictStr, Field(min_length=1, max_length=128)]


class SpeechBody(BaseModel):
    """Every known field of a speech request; unknown ones are kept as ``model_extra``."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)

    model: Annotated[StrictStr, Field(max_length=256)] | None = None
    input: StrictStr
    voice: Annotated[StrictStr, Field(max_length=128)] | VoiceObject | None = None
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] | None = None
    speed: Annotated[Number, Field(ge=MIN_SPEED, le=MAX_SPEED)] | None = None
    stream: StrictBool | None = None
    """omni's own switch, equivalent to ``stream_format: "audio"``."""
    stream_format: Literal["sse", "audio"] | None = None
    instructions: Annotated[StrictStr, Field(max_length=4096)] | None = None
    # fields the bundled models read (docs: the model's README); ranges bound what reaches a stage
    ref_audio: Annotated[StrictStr, Field(max_length=16 * 1024 * 1024)] | None = None
    """A reference recording for voice cloning: base64 WAV, optionally as a ``data:audio/wav;base64,`` URL."""
    seed: Annotated[StrictInt, Field(ge=0, le=INT64[1])] | None = None
    max_new_tokens: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    timestamps: Literal["word"] | None = None
    """Word start and end times from the pipeline's aligner stage (docs/voice-agents.md)."""

    @field_validator("model", "input", "voice", "instructions", mode="after")
    @classmethod
    def _valid_unicode(cls, value: Any) -> Any:
        if isinstance(value, str) and not utf8(value):
            raise ValueError("string is not valid Unicode (it holds a lone surrogate)")
        return value

    @model_validator(mode="after")
    def _extras_are_bounded_json(self) -> SpeechBody:
        for key, value in (self.model_extra or {}).items():
            if key in _RESERVED:
                raise ValueError(f"[{key}] field {key!r} is reserved; send the text as 'input'")
            problem = _json_problem(value, 1)
            if problem:
                raise ValueError(f"[{key}] {key}: {problem}")
        return self


@dataclass(frozen=True)
class SpeechLimits:
    max_input_chars: int = DEFAULT_MAX_INPUT_CHARS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    default_format: str = "mp3"


@dataclass(frozen=True)
class SpeechRequest:
    """A validated request; :meth:`entry_data` is what the entry stage receives."""

    model: str
    text: str
    voice: str | None
    response_format: str
    speed: float
    stream: bool
    stream_format: str | None = None
    """``"sse"`` for server-sent events, ``"audio"`` (or ``stream: true``) for raw streamed audio."""
    instructions: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def sse(self) -> bool:
        return self.stream_format == "sse"

    def entry_data(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.extra)
        data.update(text=self.text, voice=self.voice, speed=self.speed, response_format=self.response_format, stream=self.stream)
        if self.instructions is not None:
            data["instructions"] = self.instructions
        return data


def parse_body(raw: bytes) -> dict[str, Any]:
    """Strict JSON: bounded integer literals, no NaN/Infinity, bounded nesting, UTF-8."""
    try:
        body = json.loads(raw, parse_int=_bounded_int, parse_float=_finite_float, parse_constant=_no_constant)
    except _NumberError as exc:
        raise bad_request(f"request body has {exc}", code="invalid_json") from None
    except RecursionError:
        raise bad_request("request body is nested too deeply to be a speech request", code="invalid_json") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad_request(f"request body is not valid JSON: {exc}", code="invalid_json") from None
    except ValueError as exc:  # json's own guards (e.g. the int digit limit) raise plain ValueError
        raise bad_request(f"request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise bad_request(f"request body must be a JSON object, got {type(body).__name__}", code="invalid_json")
    return body


def parse_speech(body: Mapping[str, Any], models: tuple[str, ...], limits: SpeechLimits) -> SpeechRequest:
    if "input" not in body or body.get("input") is None:
        raise bad_request("input is required: the text to synthesize", param="input", code="missing_required_parameter")
    try:
        parsed = SpeechBody.model_validate(dict(body))
    except ValidationError as exc:
        raise _from_validation(exc) from None
    model = _model(parsed.model, models)
    text = _input(parsed.input, limits.max_input_chars)
    voice = parsed.voice.id if isinstance(parsed.voice, VoiceObject) else parsed.voice
    fmt = parsed.response_format or limits.default_format
    stream_format = parsed.stream_format or ("audio" if parsed.stream else None)
    extra = dict(parsed.model_extra or {})
    for name in ("seed", "max_new_tokens", "timestamps"):
        if getattr(parsed, name) is not None:
            extra[name] = getattr(parsed, name)
    if parsed.ref_audio is not None:
        extra["ref_audio"] = _ref_audio(parsed.ref_audio)
    speed = 1.0 if parsed.speed is None else float(parsed.speed)
    return SpeechRequest(model, text, voice, fmt, speed, stream_format is not None, stream_format, parsed.instructions, extra)


def _model(value: str | None, models: tuple[str, ...]) -> str:
    if value is None:
        return models[0]
    if value not in models:
        raise APIError(
            404,
            f"The model {value!r} does not exist on this server; it serves {', '.join(repr(m) for m in models)}",
            param="model",
            code="model_not_found",
        )
    return value


def _input(value: str, max_chars: int) -> str:
    if not value.strip():
        raise bad_request("input is empty: give the text to synthesize", param="input", code="empty_input")
    if len(value) > max_chars:
        raise APIError(
            413,
            f"input is {len(value)} characters; this server accepts at most {max_chars}. Split the text into several requests",
            param="input",
            code="string_above_max_length",
        )
    return value


def _ref_audio(value: str) -> bytes:
    _, _, payload = value.partition("base64,") if value.startswith("data:") else ("", "", value)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request("ref_audio must be a base64-encoded WAV file (or a data:audio/wav;base64, URL)", param="ref_audio", code="invalid_value") from None
    if data[:4] == b"RIFF":  # a WAV header: its own fields are checked here (sample rate 0, torn frames)
        problem = wav_problem(data)
        if problem is not None:
            raise bad_request(f"ref_audio must be a 16- or 32-bit PCM WAV recording, but {problem}", param="ref_audio", code="invalid_value")
    # any other bytes are decoded (FLAC, MP3, Ogg...) by the voice resolver, whose errors name ref_audio too
    return data


_CODES = {"response_format": "unsupported_response_format", "stream_format": "unsupported_stream_format", "timestamps": "unsupported_timestamps"}
_TYPE_ERRORS = ("_type", "_parsing", "model_attributes_type", "is_instance_of", "union_tag_invalid")


def _from_validation(exc: ValidationError) -> APIError:
    """The first problem, with OpenAI's ``param`` (the field) and a code a client can branch on."""
    error = exc.errors(include_url=False)[0]
    message = str(error.get("msg", "invalid value"))
    if message.startswith("Value error, [") and "] " in message:  # an extra field: "[name] reason"
        param, _, reason = message.removeprefix("Value error, [").partition("] ")
        code = "reserved_field" if "reserved" in reason else "invalid_value"
        return bad_request(reason, param=param, code=code)
    loc = [str(part) for part in error.get("loc", ()) if not str(part).startswith(("function-", "constrained-", "is-instance"))]
    param = loc[0] if loc else None
    kind = str(error.get("type", ""))
    code = _CODES.get(param or "") or ("invalid_type" if kind.endswith(_TYPE_ERRORS) else "invalid_value")
    if code.startswith("unsupported") and param == "response_format":
        message = f"response_format {error.get('input')!r} is not supported; supported: {', '.join(AUDIO_FORMATS)}"
    elif code.startswith("unsupported") and param == "timestamps":
        message = f"{error.get('input')!r} is not supported; send timestamps: 'word' for word start and end times, or leave it out"
    elif code.startswith("unsupported"):
        message = f"stream_format {error.get('input')!r} is not supported; use 'audio' (raw audio bytes) or 'sse' (server-sent events)"
    elif kind == "string_unicode" or "surrogate" in message:
        code = "invalid_unicode"
    return bad_request(f"{param}: {message}" if param else message, param=param, code=code)


def _json_problem(value: Any, depth: int) -> str | None:
    """Why ``value`` cannot travel to a stage as plain data, or None."""
    if depth > MAX_EXTRA_DEPTH:
        return f"nested deeper than {MAX_EXTRA_DEPTH} levels"
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if INT64[0] <= value <= INT64[1] else "integer outside the signed 64-bit range"
    if isinstance(value, float):
        return None if math.isfinite(value) else "number is not finite"
    if isinstance(value, str):
        return None if utf8(value) else "string is not valid Unicode (a lone surrogate)"
    if isinstance(value, list):
        return next((p for p in (_json_problem(v, depth + 1) for v in value) if p), None)
    if isinstance(value, dict):
        for key, item in value.items():
            problem = None if utf8(key) else "key is not valid Unicode" if isinstance(key, str) else "key is not a string"
            problem = problem or _json_problem(item, depth + 1)
            if problem:
                return problem
        return None
    return f"unsupported value of type {type(value).__name__}"


def utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _NumberError(ValueError):
    pass


def _bounded_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise _NumberError(f"an integer of {len(literal.lstrip('-'))} digits; integers are limited to {MAX_INT_DIGITS} digits")
    return int(literal)


def _finite_float(literal: str) -> float:
    if len(literal) > 64:
        raise _NumberError(f"a number literal of {len(literal)} characters; numbers are limited to 64")
    value = float(literal)
    if not math.isfinite(value):
        raise _NumberError(f"the number {literal[:20]} which overflows a 64-bit float")
    return value


def _no_constant(name: str) -> Any:
    raise _NumberError(f"{name}, which is not JSON; send a finite number")
