"""Request preparation shared by every preprocessing stage: text, limits, voice and seed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

    def to_data(self) -> dict[str, Any]:
        """Plain codec types for ``StagePayload.data``."""
        return {
            "text": self.text,
            "input_ids": list(self.input_ids),
            "limits": self.limits.to_dict(),
            "voice_index": self.voice_index,
            "speed": self.speed,
            "seed": self.seed,
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
    )
