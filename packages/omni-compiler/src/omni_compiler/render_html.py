"""The topology as a web page: one SVG drawing for code review and for ``omni serve``'s live page.

:func:`view` turns a :class:`CompiledTopology` into the plain JSON the drawing
script consumes (processes with their replicas and stages, every edge with how
it travels); :func:`page` embeds that JSON, the script and the style sheet into
one self-contained HTML file: no build step, no network, nothing but this
package's data files (``omni_compiler/html/``). ``omni-compile show --format html
FILE -o topology.html`` writes it; the runtime serves the same page at ``/``
with a live-state script and a synthesis form added (``extra_body``).
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

from .topology import CompiledEdge, CompiledTopology

CROSS_PROCESS_TRANSPORT = "ZeroMQ IPC; tensors through shared memory"
"""How a payload crosses between two OS processes in omni's runtime."""
CROSS_PROCESS_STREAM = "ZeroMQ IPC chunk stream; tensors through shared memory"


def transport(edge: CompiledEdge) -> str:
    """A short label for how ``edge`` carries data at run time."""
    if edge.process_local_reason:
        return f"process-local (in memory): {edge.process_local_reason}"
    if not edge.cross_process:
        return "in-process (same OS process)"
    return CROSS_PROCESS_STREAM if "stream_to" in edge.kinds else CROSS_PROCESS_TRANSPORT


def view(topology: CompiledTopology) -> dict[str, Any]:
    """The drawing's input: plain JSON, stable across runs (the same topology gives the same text)."""
    stage_order = {s.name: i for i, s in enumerate(topology.stages)}
    return {
        "name": topology.name,
        "entry_stage": topology.entry_stage,
        "stages": [
            {"name": s.name, "process": s.process, "terminal": s.terminal, "factory": s.factory, "tp_size": s.tp_size}
            for s in topology.stages
        ],
        "processes": [
            {
                "name": p.name,
                "stages": sorted(p.stages, key=lambda name: stage_order.get(name, 0)),
                "tp_rank": p.tp_rank,
                "tp_size": p.tp_size,
                "num_replicas": p.num_replicas,
                "instances": [i.name for i in topology.instances_of(p.name)],
            }
            for p in topology.processes
        ],
        "instances": [
            {
                "name": i.name,
                "process": i.process,
                "replica": i.replica,
                "gpus": list(i.gpus),
                "stages": [{"stage": s.stage, "tp_rank": s.tp_rank, "gpu": s.gpu, "memory_fraction": s.memory_fraction} for s in i.stages],
            }
            for i in topology.instances
        ],
        "edges": [
            {
                "src": e.src,
                "dst": e.dst,
                "kinds": list(e.kinds),
                "cross_process": e.cross_process,
                "process_local": bool(e.process_local_reason),
                "transport": transport(e),
            }
            for e in topology.edges
        ],
    }


def _asset(name: str) -> str:
    return resources.files("omni_compiler").joinpath("html", name).read_text(encoding="utf-8")


def _script_json(data: Any) -> str:
    """JSON safe inside a <script> element (no '</' can end it early)."""
    return json.dumps(data, sort_keys=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page(topology_view: dict[str, Any], *, title: str | None = None, extra_body: str = "", live: bool = False) -> str:
    """A standalone HTML page drawing ``topology_view`` (from :func:`view`)."""
    name = title or topology_view.get("name") or "pipeline"
    return (
        _asset("page.html")
        .replace("{{TITLE}}", html.escape(str(name)))
        .replace("{{STYLE}}", _asset("topology.css"))
        .replace("{{SCRIPT}}", _asset("topology.js"))
        .replace("{{VIEW}}", _script_json(topology_view))
        .replace("{{MODE}}", "live" if live else "static")
        .replace("{{EXTRA}}", extra_body)
    )


def render(topology: CompiledTopology) -> str:
    """``omni-compile show --format html``: the page for one compiled topology."""
    return page(view(topology))
