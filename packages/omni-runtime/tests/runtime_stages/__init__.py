"""Small stage factories used by omni-runtime's tests (imported in spawned workers).

They live beside the test folders (not inside a test package) so spawned children import them by a
plain dotted path (``runtime_stages.basic:build_router``) once ``packages/omni-runtime/tests``
is on ``sys.path`` (inherited by ``spawn`` children, or passed via PYTHONPATH).
"""
