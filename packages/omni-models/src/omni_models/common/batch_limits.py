"""The deployment-tier bounds of one engine's running batch and the error for a value it cannot use.

``max_batch_size`` and ``max_batch_tokens`` are knobs (``factory_args``); omni-config checks their
declared ranges before start, and :meth:`BatchLimits.check` judges what only the built model can
(``max_batch_tokens`` against the model's context), every problem at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omni_runtime.errors import StageConfigError

DEFAULT_MAX_BATCH_SIZE = 32


class BatchKnobError(StageConfigError):
    """A deployment knob of the engine (``factory_args``) has a value it cannot use (every one at once).

    ``max_batch_tokens`` below the model's context can only be judged when the model is built,
    so this is a :class:`~omni_runtime.errors.StageConfigError`: exit 1, path, value, rule, fix."""

    def __init__(self, stage: str, problems: list[StageConfigError]) -> None:
        first, *more = problems
        super().__init__(first.knob, first.value, first.rule, first.fix, more=tuple(more))
        self.message = f"stage {stage}: " + "\n".join(
            f"factory_args.{p.knob}: {p.value!r} is not allowed\n  rule: {p.rule}\n  fix:  {p.fix}" for p in problems
        )

    def __str__(self) -> str:
        return self.message


def _knob_problem(name: str, value: Any, low: int, meaning: str, fix: str) -> StageConfigError | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        return StageConfigError(name, value, f"{meaning}; an integer >= {low}", fix)
    return None


@dataclass(frozen=True)
class BatchLimits:
    """Deployment-tier bounds of one engine's running batch (``factory_args`` of its stage)."""

    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    max_batch_tokens: int | None = None

    def check(self, max_seq_len: int, stage: str) -> None:
        """Every problem at once, each naming the knob, the value, the rule and the fix."""
        problems = [
            _knob_problem(
                "max_batch_size", self.max_batch_size, 1, "requests decoded together in one forward per step",
                f"set stages.{stage}.factory_args.max_batch_size to 1 or more (default {DEFAULT_MAX_BATCH_SIZE})",
            )
        ]
        if self.max_batch_tokens is not None:
            problems.append(
                _knob_problem(
                    "max_batch_tokens", self.max_batch_tokens, max_seq_len,
                    f"cache positions the running batch may reserve in total; at least the model's context ({max_seq_len}), "
                    "or a long request could never be admitted",
                    f"set stages.{stage}.factory_args.max_batch_tokens to {max_seq_len} or more, or remove it (no limit beyond max_batch_size)",
                )
            )
        found = [p for p in problems if p]
        if found:
            raise BatchKnobError(stage, found)
