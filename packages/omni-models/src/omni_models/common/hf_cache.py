"""A published checkpoint in the local Hugging Face hub cache, found without network.

``huggingface-cli download ORG/NAME`` leaves ``models--ORG--NAME/snapshots/<revision>/`` under
``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``, with ``refs/main``
naming the revision (a cache holding a single snapshot needs no ref). Every real-checkpoint model
resolves a model id without ``--weights`` through here.
"""

from __future__ import annotations

import os
from pathlib import Path

from .checkpoint_error import CheckpointError


def hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def cached_snapshot(model_id: str) -> Path | None:
    """The model's snapshot in the cache (its name matched case-insensitively), None when there is
    none; a CheckpointError when several snapshots leave the choice open."""
    root = hub_cache()
    wanted = "models--" + model_id.replace("/", "--")
    if not root.is_dir():
        return None
    for repo in sorted(root.iterdir()):
        if repo.name.lower() != wanted.lower():
            continue
        ref = repo / "refs" / "main"
        if ref.is_file():
            snapshot = repo / "snapshots" / ref.read_text(encoding="utf-8").strip()
            return snapshot if snapshot.is_dir() else None
        snapshots = sorted(p for p in (repo / "snapshots").glob("*") if p.is_dir())
        if len(snapshots) == 1:
            return snapshots[0]
        if snapshots:
            raise CheckpointError(
                f"{repo}: several snapshots and no refs/main to choose one of the {len(snapshots)}\n"
                f"  fix:  pass --weights {snapshots[-1]} (or write the commit to {ref})"
            )
    return None
