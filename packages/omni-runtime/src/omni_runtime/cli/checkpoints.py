"""Published checkpoints a model serves, resolved and verified before any process starts.

A model package that runs real weights registers a function in the ``omni.checkpoints``
entry-point group under its model id (lower case): ``resolve(model_id, weights)``. It returns

- the checkpoint directory (``--weights``, or one it finds locally, such as a Hugging Face cache
  snapshot), verified; the model's own pipeline runs it;
- a :class:`Checkpoint`, when another registered pipeline serves that directory: a model id
  whose default pipeline runs random weights of the real shape names the real pipeline this way
  when ``--weights`` holds the published checkpoint;
- ``None``: no published checkpoint, the model runs as registered with ``--weights`` as given;

or raises ``ValueError`` whose text names the file, the key and the fix. Models without an
entry keep ``--weights`` as given.
"""

from __future__ import annotations

from dataclasses import dataclass


class CheckpointProblem(Exception):
    """The checkpoint a command needs is missing or does not match its model."""


@dataclass(frozen=True)
class Checkpoint:
    """A verified checkpoint directory and the registered model id whose pipeline serves it
    (the command still serves it under the id the user gave)."""

    directory: str | None
    pipeline: str | None = None


def resolve_checkpoint(model: str | None, weights: str | None) -> Checkpoint:
    """The checkpoint ``model`` runs with and the pipeline that runs it (``None``: ``model``'s own)."""
    if not model:
        return Checkpoint(weights)
    from importlib.metadata import entry_points

    wanted = model.lower()
    for entry in entry_points(group="omni.checkpoints"):
        if entry.name == wanted:
            try:
                found = entry.load()(model, weights)
            except ValueError as exc:
                raise CheckpointProblem(str(exc)) from None
            if found is None:
                return Checkpoint(weights)
            return found if isinstance(found, Checkpoint) else Checkpoint(str(found))
    return Checkpoint(weights)


def resolve_weights(model: str | None, weights: str | None) -> str | None:
    """The checkpoint directory alone (see :func:`resolve_checkpoint`)."""
    return resolve_checkpoint(model, weights).directory
