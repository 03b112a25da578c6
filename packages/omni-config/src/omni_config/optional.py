"""Optional stages: declared by the model, off until a deployment switches them on.

A stage with ``optional: true`` (model tier) is part of the pipeline only when the
deployment sets ``enabled: true`` on it (``--stages.aligner.enabled true`` or a
deployment file). While it is off it is removed before anything else looks at the
config, together with its edges: the stages that fed it through ``next`` lose that
target, and when the removed stage was terminal they become terminal in its place
(a vocoder that declares ``next: aligner`` is the terminal stage again). The
compiler, the runtime and ``omni-compile show`` then see the pipeline the operator
runs, and an off stage costs nothing: no process, no thread, no hop.
"""

from __future__ import annotations

from typing import Any

_EDGE_FIELDS = ("next", "stream_to", "wait_for")


def _names(value: Any) -> list[Any]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value) if isinstance(value, list) else value


def drop_disabled_stages(raw: Any) -> Any:
    """``raw`` (a pipeline mapping) without its optional stages that are not enabled."""
    if not isinstance(raw, dict) or not isinstance(raw.get("stages"), list):
        return raw
    stages = raw["stages"]
    off = {
        s["name"]: bool(s.get("terminal"))
        for s in stages
        if isinstance(s, dict) and isinstance(s.get("name"), str) and s.get("optional") is True and s.get("enabled") is not True
    }
    if not off or len(off) == len(stages):
        return raw  # nothing to drop (or nothing would be left: let validation say what is wrong)
    kept: list[Any] = []
    for stage in stages:
        if isinstance(stage, dict) and stage.get("name") in off:
            continue
        if isinstance(stage, dict):
            stage = dict(stage)
            for field in _EDGE_FIELDS:
                if field not in stage:
                    continue
                names = _names(stage[field])
                if not isinstance(names, list):
                    continue
                removed = [n for n in names if isinstance(n, str) and n in off]
                if removed:
                    stage[field] = [n for n in names if n not in off]
                    if field == "next" and any(off[n] for n in removed):
                        stage["terminal"] = True
        kept.append(stage)
    out = dict(raw)
    out["stages"] = kept
    edges = raw.get("process_local_edges")
    if isinstance(edges, list):
        out["process_local_edges"] = [e for e in edges if not (isinstance(e, dict) and (e.get("src") in off or e.get("dst") in off))]
    return out
