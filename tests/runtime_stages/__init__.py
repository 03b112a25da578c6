"""Small stage factories used by omni-runtime's tests (imported in spawned workers).

They live outside the test package so spawned children can import them by a
plain dotted path (``runtime_stages.basic:build_router``) once ``<repo>/tests``
is on ``sys.path`` (inherited by ``spawn`` children, or passed via PYTHONPATH).
"""
