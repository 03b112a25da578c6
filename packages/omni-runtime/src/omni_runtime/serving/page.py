"""The page at ``/`` and its JSON at ``/v1/topology``.

The drawing is omni-compiler's (:mod:`omni_compiler.render_html`), the same one
``omni-compile show --format html`` writes; the server adds each process
instance's live state and queue depth (polled from ``/v1/topology``) and a form
that synthesises with any voice and format and plays the stream in the page.
Everything ships in the packages (no CDN, no build step).
"""

from __future__ import annotations

import html
from functools import cache
from importlib import resources
from typing import Any

from omni_compiler import render_html

from .voices import served_voices


@cache
def _static(name: str) -> str:
    return resources.files("omni_runtime.serving").joinpath("static", name).read_text(encoding="utf-8")


def health_status(state: dict[str, Any]) -> str:
    """The runtime's own status when it reports one, else derived from its processes."""
    if isinstance(state.get("status"), str):
        return str(state["status"])
    if state.get("healthy"):
        return "ok"
    processes = dict(state.get("processes") or {}).values()
    if not processes or ("starting" in processes and "dead" not in processes):
        return "starting"
    return "unhealthy"


def topology_state(runtime: Any) -> dict[str, Any]:
    """The compiled view plus, per process instance, its state, queue depth and pid."""
    health = runtime.health()
    processes = dict(health.get("processes") or {})
    depths = runtime.queue_depths()
    pids = runtime.instance_pids() if hasattr(runtime, "instance_pids") else {}
    status = health_status(health)
    instances = {
        inst.name: {"state": processes.get(inst.name, "starting"), "queue_depth": int(depths.get(inst.name, 0)), "pid": pids.get(inst.name)}
        for inst in runtime.topology.instances
    }
    groups = dict(health.get("tp_groups") or {})
    for name, group in groups.items():  # each rank's box says which group it is in and how the group is
        for rank in group["ranks"]:
            if rank["instance"] in instances:
                instances[rank["instance"]]["tp"] = {"group": name, "rank": rank["rank"], "size": group["size"], "group_state": group["state"]}
    live = {"status": status, "instances": instances, "transports": _transports(runtime), "tp_groups": groups}
    return {"view": topology_view(runtime), "live": live}


def topology_view(runtime: Any) -> dict[str, Any]:
    """The compiled view as this run places it: a run on the CPU (``--device cpu``, or no CUDA) shows no GPU ids."""
    view = render_html.view(runtime.topology)
    if getattr(runtime, "device", None) == "cpu":
        view["device"] = "cpu"
        for instance in view["instances"]:
            instance["gpus"] = []
            for stage in instance["stages"]:
                stage["gpu"] = None
    return view


def _transports(runtime: Any) -> dict[str, str]:
    """``"<src instance>-><dst instance>"``: ``ipc`` (one node: sockets + shared memory) or ``tcp`` (across nodes)."""
    try:
        pairs = runtime.edge_transports() if hasattr(runtime, "edge_transports") else {}
    except Exception:  # noqa: BLE001 - not known yet while a cluster run places its actors
        return {}
    return {f"{src}->{dst}": str(kind) for (src, dst), kind in sorted(pairs.items())}


def page_html(runtime: Any, settings: Any) -> str:
    """The live page: the drawing, the synthesis form (voices and models of this server) and its script."""
    options = "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in served_voices(runtime, settings))
    models = "".join(f'<option value="{html.escape(m)}">{html.escape(m)}</option>' for m in settings.models)
    form = (
        _static("synth.html")
        .replace("{{VOICES}}", options)
        .replace("{{MODELS}}", models)
        .replace("{{AUTH}}", "required" if settings.api_key else "")
    )
    extra = form + _static("voice.html") + "<script>" + _static("live.js") + "</script><script>" + _static("voice.js") + "</script>"
    return render_html.page(topology_view(runtime), extra_body=extra, live=True)
