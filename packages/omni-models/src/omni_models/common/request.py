"""Request preparation shared by every preprocessing stage: text, limits, voice and seed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omni_runtime.errors import InvalidRequest

from .audio import voice_index
from .limits import GenerationLimits, check_speed, limits_for_text
from .sampling import request_seed
from .text import ByteTokenizer, prepare_text

TOKENIZER = ByteTokenizer()


@dataclass(frozen=True)
class TextRequest:
    text: str
    input_ids: list[int]
    limits: GenerationLimits
    voice_index: int
    speed: float
    seed: int
    temperature: float | None = None
    """The request's own sampling temperature (None: the engine's ``factory_args`` default)."""
    top_k: int | None = None

    def to_data(self) -> dict[str, Any]:
        """Plain codec types for ``StagePayload.data``."""
        return {
            "text": self.text,
            "input_ids": list(self.input_ids),
            "limits": self.limits.to_dict(),
            "voice_index": self.voice_index,
            "speed": self.speed,
            "seed": self.seed,
            "temperature": self.temperature,
            "top_k": self.top_k,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> TextRequest:
        return cls(
            text=data["text"],
            input_ids=[int(i) for i in data["input_ids"]],
            limits=GenerationLimits.from_dict(data["limits"]),
            voice_index=int(data["voice_index"]),
            speed=float(data["speed"]),
            seed=int(data["seed"]),
            temperature=data.get("temperature"),
            top_k=data.get("top_k"),
        )


def prepare_text_request(data: dict[str, Any], *, frame_rate: float, max_chars: int, max_seconds: float) -> TextRequest:
    """Normalise and tokenise the text and size the generation; every user error is a ValueError."""
    if "text" not in data:
        raise ValueError("request has no 'text' field")
    text = prepare_text(data["text"], max_chars=max_chars)
    speed = check_speed(data.get("speed", 1.0))
    limits = limits_for_text(
        len(text),
        frame_rate=frame_rate,
        speed=speed,
        cap=max(1, round(max_seconds * frame_rate)),
        request_max=data.get("max_new_tokens"),
    )
    return TextRequest(
        text=text,
        input_ids=TOKENIZER.encode(text),
        limits=limits,
        voice_index=voice_index(data.get("voice")),
        speed=speed,
        seed=request_seed(data),
        **request_sampling(data),
    )


def request_sampling(data: dict[str, Any]) -> dict[str, Any]:
    """A request's optional ``temperature`` (>= 0; 0 is greedy) and ``top_k`` (>= 0; 0 keeps every
    code), checked here so a bad value is the client's error before anything runs."""
    temperature, top_k = data.get("temperature"), data.get("top_k")
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 10):
        raise InvalidRequest(f"temperature must be a number between 0 and 10, got {temperature!r}", param="temperature")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise InvalidRequest(f"top_k must be an integer >= 0, got {top_k!r}", param="top_k")
    return {"temperature": None if temperature is None else float(temperature), "top_k": top_k}
