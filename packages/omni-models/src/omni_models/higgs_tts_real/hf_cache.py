"""Finding the published checkpoint in a local Hugging Face cache, without network.

``--weights DIR`` names the directory; without it the stages look for the snapshot that
``huggingface-cli download bosonai/higgs-tts-3-4b`` leaves in the hub cache:
``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``, in the layout
``models--bosonai--higgs-tts-3-4b/snapshots/<revision>/`` with ``refs/main`` naming the
revision (a cache holding a single snapshot needs no ref).
"""

from __future__ import annotations

import os
from pathlib import Path

from omni_models.common.weights import CheckpointError

REPO_ID = "bosonai/higgs-tts-3-4b"


def hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def cached_snapshot(repo_id: str = REPO_ID) -> Path:
    """The cached snapshot directory of ``repo_id``, or a CheckpointError saying where it looked."""
    repo = hub_cache() / f"models--{repo_id.replace('/', '--')}"
    ref = repo / "refs" / "main"
    if ref.is_file():
        snapshot = repo / "snapshots" / ref.read_text(encoding="utf-8").strip()
        if snapshot.is_dir():
            return snapshot
    snapshots = sorted(p for p in (repo / "snapshots").glob("*") if p.is_dir())
    if len(snapshots) == 1:
        return snapshots[0]
    found = "several snapshots and no refs/main" if snapshots else "no snapshot"
    raise CheckpointError(
        f"no --weights given and the Hugging Face cache has {found} of {repo_id} under {repo}\n"
        f"  fix: pass --weights DIR (the downloaded checkpoint directory), or download {repo_id} into that cache "
        "(HF_HUB_CACHE / HF_HOME select it)"
    )
