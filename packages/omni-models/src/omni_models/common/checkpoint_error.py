"""The error of a ``--weights`` directory that does not fit the model: the user's to fix.

Kept apart from ``weights`` so light modules (a checkpoint's ``config.json`` reader) raise it
without importing torch. It is a :class:`~omni_runtime.errors.StageConfigError` on the
``model_path`` the runtime injects, so ``omni`` reports it as ``--weights = '<dir>'`` with its
rule and fix, exit 1, instead of the worker's traceback.
"""

from __future__ import annotations

from pathlib import Path

from omni_runtime.errors import StageConfigError

FIX_MARK = "\n  fix:"
DEFAULT_FIX = "point --weights at the model's checkpoint directory (python -m omni_models.export writes one), or use load_format 'dummy'"


class CheckpointError(StageConfigError):
    """A checkpoint directory that cannot be served (missing, unreadable, misshapen).

    ``message`` is the rule; a message written as ``"<problem>\\n  fix:  <fix>"`` (one problem)
    carries its own fix. ``model_path`` is the directory when the raiser knows it; otherwise the
    worker fills in the stage's ``model_path``."""

    def __init__(self, message: str, model_path: str | Path | None = None, fix: str | None = None) -> None:
        rule = message
        if fix is None and message.count(FIX_MARK) == 1:
            rule, _, fix = message.partition(FIX_MARK)
        elif fix is None and FIX_MARK in message:
            fix = "fix each problem above as its line says"
        super().__init__("model_path", None if model_path is None else str(model_path), rule.strip(), (fix or DEFAULT_FIX).strip())
        self.message = message if FIX_MARK in message else f"{message}; {self.fix}"

    def __str__(self) -> str:
        """The problem lines with their fixes, as the pre-start check (``omni_runtime.cli.checkpoints``) prints them."""
        return self.message
