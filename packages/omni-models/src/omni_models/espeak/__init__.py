"""The espeak reference pipeline (``omni/espeak``): the embedded default model.

Light on purpose: the factories live in :mod:`omni_models.espeak.stages` and are
imported only by the process that builds them.
"""
