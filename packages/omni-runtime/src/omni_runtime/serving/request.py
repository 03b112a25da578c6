"""Validation of ``POST /v1/audio/speech`` bodies into the entry payload.

Hand-written rather than a pydantic model so each rejection carries the
OpenAI ``param`` and ``code`` a client can act on, and so the size limits are
checked before anything reaches the runtime.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .audio import AUDIO_FORMATS, STREAMING_FORMATS
from .errors import APIError, bad_request

DEFAULT_MAX_INPUT_CHARS = 4096
"""OpenAI's own limit for ``input``."""
DEFAULT_MAX_BODY_BYTES = 64 * 1024
"""Enough for 4096 characters JSON-escaped as ``\\uXXXX`` plus the other fields."""
MIN_SPEED, MAX_SPEED = 0.25, 4.0

_KNOWN = {"model", "input", "voice", "response_format", "speed", "stream", "stream_format", "instructions"}
_RESERVED = {"text", "request_id"}
"""Extra fields that would overwrite what the runtime or the entry payload owns."""


@dataclass(frozen=True)
class SpeechLimits:
    max_input_chars: int = DEFAULT_MAX_INPUT_CHARS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    default_format: str = "wav"


@dataclass(frozen=True)
class SpeechRequest:
    """A validated request; :meth:`entry_data` is what the entry stage receives."""

    model: str
    text: str
    voice: str | None
    response_format: str
    speed: float
    stream: bool
    instructions: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def entry_data(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.extra)
        data.update(
            text=self.text,
            voice=self.voice,
            speed=self.speed,
            response_format=self.response_format,
            stream=self.stream,
        )
        if self.instructions is not None:
            data["instructions"] = self.instructions
        return data


def parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad_request(f"request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise bad_request(f"request body must be a JSON object, got {type(body).__name__}", code="invalid_json")
    return body


def parse_speech(body: Mapping[str, Any], models: tuple[str, ...], limits: SpeechLimits) -> SpeechRequest:
    model = _model(body.get("model"), models)
    text = _input(body.get("input", None), "input" in body, limits.max_input_chars)
    voice = _voice(body.get("voice"))
    fmt = _format(body.get("response_format"), limits.default_format)
    speed = _speed(body.get("speed"))
    stream = _stream(body.get("stream"), body.get("stream_format"))
    if stream and fmt not in STREAMING_FORMATS:
        raise bad_request(
            f"response_format {fmt!r} cannot be streamed; streaming supports {', '.join(STREAMING_FORMATS)}. "
            "Use stream=false for this format or pick a streaming one",
            param="response_format",
            code="unsupported_stream_format",
        )
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise bad_request("instructions must be a string", param="instructions", code="invalid_type")
    extra = {k: v for k, v in body.items() if k not in _KNOWN}
    for key in extra:
        if key in _RESERVED:
            raise bad_request(f"field {key!r} is reserved; send the text as 'input'", param=key, code="reserved_field")
    return SpeechRequest(model, text, voice, fmt, speed, stream, instructions, extra)


def _model(value: Any, models: tuple[str, ...]) -> str:
    if value is None:
        return models[0]
    if not isinstance(value, str):
        raise bad_request("model must be a string", param="model", code="invalid_type")
    if value not in models:
        raise APIError(
            404,
            f"The model {value!r} does not exist on this server; it serves {', '.join(repr(m) for m in models)}",
            param="model",
            code="model_not_found",
        )
    return value


def _input(value: Any, present: bool, max_chars: int) -> str:
    if not present or value is None:
        raise bad_request("input is required: the text to synthesize", param="input", code="missing_required_parameter")
    if not isinstance(value, str):
        raise bad_request(f"input must be a string, got {type(value).__name__}", param="input", code="invalid_type")
    if not value.strip():
        raise bad_request("input is empty: give the text to synthesize", param="input", code="empty_input")
    if len(value) > max_chars:
        raise bad_request(
            f"input is {len(value)} characters; the maximum is {max_chars}. Split the text into several requests",
            param="input",
            code="string_above_max_length",
        )
    return value


def _voice(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"id"} and isinstance(value["id"], str):
        return value["id"]  # OpenAI's custom-voice object form
    raise bad_request('voice must be a string or {"id": "<voice>"}', param="voice", code="invalid_type")


def _format(value: Any, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str) or value not in AUDIO_FORMATS:
        raise bad_request(
            f"response_format {value!r} is not supported; supported: {', '.join(AUDIO_FORMATS)}",
            param="response_format",
            code="unsupported_response_format",
        )
    return value


def _speed(value: Any) -> float:
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise bad_request("speed must be a number", param="speed", code="invalid_type")
    if not MIN_SPEED <= value <= MAX_SPEED:
        raise bad_request(
            f"speed {value} is out of range; it must be between {MIN_SPEED} and {MAX_SPEED}",
            param="speed",
            code="invalid_value",
        )
    return float(value)


def _stream(value: Any, stream_format: Any) -> bool:
    if stream_format not in (None, "audio"):
        raise bad_request(
            f"stream_format {stream_format!r} is not supported; only 'audio' (raw audio bytes) is",
            param="stream_format",
            code="unsupported_stream_format",
        )
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_request("stream must be true or false", param="stream", code="invalid_type")
    return value
