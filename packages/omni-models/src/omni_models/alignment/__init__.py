"""The optional ``aligner`` stage: word start and end times for the audio a pipeline speaks."""

from .stage import Aligner, build_aligner

__all__ = ["Aligner", "build_aligner"]
