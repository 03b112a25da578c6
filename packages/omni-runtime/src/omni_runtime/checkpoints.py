"""Published checkpoints a model serves, resolved and verified before any process starts.

A model package that runs real weights registers a function in the ``omni.checkpoints``
entry-point group under its model id (lower case): ``resolve(model_id, weights) -> directory``.
It returns the checkpoint directory (``--weights``, or one it finds locally, such as a Hugging
Face cache snapshot) or raises ``ValueError`` whose text names the file, the key and the fix.
Models without an entry keep ``--weights`` as given.
"""

from __future__ import annotations


class CheckpointProblem(Exception):
    """The checkpoint a command needs is missing or does not match its model."""


def resolve_weights(model: str | None, weights: str | None) -> str | None:
    if not model:
        return weights
    from importlib.metadata import entry_points

    wanted = model.lower()
    for entry in entry_points(group="omni.checkpoints"):
        if entry.name == wanted:
            try:
                return entry.load()(model, weights)
            except ValueError as exc:
                raise CheckpointProblem(str(exc)) from None
    return weights
