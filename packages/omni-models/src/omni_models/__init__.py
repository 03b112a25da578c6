"""omni model pipelines.

Each model lives in ``omni_models/<model>/`` with its pipeline file (``pipeline.yaml``), its
config class (``process_local_edges()``) and its stage factories. This module stays light on
purpose: omni-config locates the package through the ``omni.models`` entry points without
importing torch, and child processes import only the factories they build.
"""

__version__ = "0.1.0"
