"""Generation limits: how many frames an utterance may take.

Durations scale with the text: at a speaking rate of ``chars_per_second`` a text of n characters
expects ``n / chars_per_second / speed`` seconds. The engine may not stop before
``min_new_tokens`` and must stop at ``max_new_tokens``, which is also capped by the model. With
seeded random weights there is no learned end-of-speech token, so these bounds are what keeps a
synthesis the length of its text.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from omni_runtime.errors import InvalidRequest

MIN_SPEED = 0.25
MAX_SPEED = 4.0


@dataclass(frozen=True)
class GenerationLimits:
    min_new_tokens: int
    max_new_tokens: int

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not 0 <= self.min_new_tokens <= self.max_new_tokens:
            raise ValueError(
                f"min_new_tokens must be between 0 and max_new_tokens ({self.max_new_tokens}), got {self.min_new_tokens}"
            )

    def to_dict(self) -> dict[str, int]:
        """Plain ints, so the limits can travel in ``StagePayload.data``."""
        return asdict(self)

    @classmethod
    def from_dict(cls, value: Any) -> GenerationLimits:
        if not isinstance(value, dict) or set(value) != {"min_new_tokens", "max_new_tokens"}:
            raise ValueError(f"generation limits must be a dict with min_new_tokens and max_new_tokens, got {value!r}")
        return cls(int(value["min_new_tokens"]), int(value["max_new_tokens"]))


def check_speed(speed: Any) -> float:
    """The request's ``speed`` as a float in [0.25, 4.0] (the OpenAI speech API's range)."""
    if speed is None:
        return 1.0
    if isinstance(speed, bool) or not isinstance(speed, (int, float)):
        raise InvalidRequest(param="speed", message=f"speed must be a number between {MIN_SPEED} and {MAX_SPEED}, got {speed!r}")  # noqa: TRY004 - a request field: reported like its range check
    if not MIN_SPEED <= float(speed) <= MAX_SPEED:
        raise InvalidRequest(f"speed {speed} is out of range; use a value between {MIN_SPEED} and {MAX_SPEED}", param="speed")
    return float(speed)


def limits_for_text(
    num_chars: int,
    *,
    frame_rate: float,
    speed: float = 1.0,
    cap: int,
    chars_per_second: float = 15.0,
    min_ratio: float = 0.8,
    max_ratio: float = 1.2,
    request_max: Any = None,
) -> GenerationLimits:
    """Bounds for ``num_chars`` characters at ``frame_rate`` frames per second.

    ``request_max`` is a request's own ``max_new_tokens``; it can only lower the model's cap.
    """
    if num_chars < 1:
        raise ValueError("cannot size a generation for empty text")
    expected = num_chars / chars_per_second / speed * frame_rate
    upper = min(cap, max(1, math.ceil(expected * max_ratio)))
    if request_max is not None:
        if isinstance(request_max, bool) or not isinstance(request_max, int) or request_max < 1:
            raise InvalidRequest(f"max_new_tokens must be a positive integer, got {request_max!r}", param="max_new_tokens")
        upper = min(upper, request_max)
    lower = min(upper, max(1, math.floor(expected * min_ratio)))
    return GenerationLimits(min_new_tokens=lower, max_new_tokens=upper)
