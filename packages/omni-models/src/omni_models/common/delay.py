"""The delay pattern of multi-codebook AR models (MusicGen-style; MOSS-TTS Delay, Zonos, Higgs).

At step ``t`` the model emits codebook ``k`` of frame ``t - k``, so one transformer step
predicts a coarse code of the newest frame together with finer codes of older frames. Steps
before a codebook's first frame carry ``bos``; steps after the last frame carry ``pad``.
"""

from __future__ import annotations

from collections import deque
from typing import Any, overload

import torch


def apply_delay(codes: torch.Tensor, *, bos: int, pad: int) -> torch.Tensor:
    """``[K, T]`` aligned frames -> ``[K, T + K - 1]`` delayed steps."""
    k, t = codes.shape
    out = torch.full((k, t + k - 1), pad, dtype=codes.dtype, device=codes.device)
    for i in range(k):
        out[i, :i] = bos
        out[i, i : i + t] = codes[i]
    return out


def revert_delay(steps: torch.Tensor) -> torch.Tensor:
    """``[K, S]`` delayed steps -> ``[K, S - K + 1]`` aligned frames (inverse of ``apply_delay``)."""
    k, s = steps.shape
    t = s - k + 1
    if t < 0:
        raise ValueError(f"{s} delayed steps cannot hold {k} codebooks")
    return torch.stack([steps[i, i : i + t] for i in range(k)])


class DelayAligner:
    """Turns a stream of delayed step rows into aligned frames as soon as each frame is complete.

    Frame ``f`` is complete after step ``f + K - 1``; ``push`` returns the frames completed by
    one step, which is what lets a delay-pattern engine stream aligned codes to a codec.
    """

    def __init__(self, num_codebooks: int):
        self.k = num_codebooks
        self.rows: deque[Any] = deque(maxlen=num_codebooks)
        self.steps = 0

    @overload
    def push(self, row: torch.Tensor) -> torch.Tensor | None: ...
    @overload
    def push(self, row: list[int]) -> list[int] | None: ...

    def push(self, row: Any) -> Any:
        """Add step row ``[K]`` (a tensor or a list of ints); return the aligned frame ``[K]``
        it completes, if any, of the same kind."""
        self.rows.append(row)
        self.steps += 1
        if self.steps < self.k:
            return None
        frame = [self.rows[i][i] for i in range(self.k)]
        return torch.stack(frame) if isinstance(row, torch.Tensor) else frame
