"""Finding the published checkpoint in a local Hugging Face cache, without network.

``--weights DIR`` names the directory; without it the stages look for the snapshot that
``huggingface-cli download bosonai/higgs-tts-3-4b`` leaves in the hub cache:
``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``, in the layout
``models--bosonai--higgs-tts-3-4b/snapshots/<revision>/`` with ``refs/main`` naming the
revision (a cache holding a single snapshot needs no ref).
"""

from __future__ import annotations

from pathlib import Path

from omni_models.common import hf_cache
from omni_models.common.weights import CheckpointError

REPO_ID = "bosonai/higgs-tts-3-4b"


def cached_snapshot(repo_id: str = REPO_ID) -> Path:
    """The cached snapshot directory of ``repo_id``, or a CheckpointError saying where it looked."""
    snapshot = hf_cache.cached_snapshot(repo_id)
    if snapshot is not None:
        return snapshot
    repo = hf_cache.hub_cache() / f"models--{repo_id.replace('/', '--')}"
    raise CheckpointError(
        f"no --weights given and the Hugging Face cache has no snapshot of {repo_id} under {repo}\n"
        f"  fix: pass --weights DIR (the downloaded checkpoint directory), or download {repo_id} into that cache "
        "(HF_HUB_CACHE / HF_HOME select it)"
    )
