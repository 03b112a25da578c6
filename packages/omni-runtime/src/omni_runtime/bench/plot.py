"""``omni bench --plot``: throughput and time to first audio against concurrency, per topology.

Two panels side by side share the concurrency axis (log scale: 1, 8, 32 ...): audio seconds
produced per wall second, and TTFA p50 with the p95 as a lighter band. Each topology (and text
length, when several were measured) is one line, so the topologies compare at a glance.
matplotlib is an optional extra (``pip install 'omni-runtime[plot]'``); ``omni bench`` checks
for it before running anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def plot_rows(rows: Sequence[Any], path: str, *, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    lengths = sorted({r.text_chars for r in rows})
    series: dict[str, list[Any]] = {}
    for r in rows:
        label = r.topology if len(lengths) == 1 else f"{r.topology}, {r.text_chars} chars"
        series.setdefault(label, []).append(r)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    for label, points in series.items():
        points = sorted(points, key=lambda r: r.concurrency)
        xs = [r.concurrency for r in points]
        (line,) = left.plot(xs, [r.audio_s_per_s for r in points], marker="o", label=label)
        ttfa = [(r.concurrency, r.ttfa_p50_s * 1000, (r.ttfa_p95_s or r.ttfa_p50_s) * 1000) for r in points if r.ttfa_p50_s is not None]
        if ttfa:
            right.plot([t[0] for t in ttfa], [t[1] for t in ttfa], marker="o", color=line.get_color(), label=label)
            right.fill_between([t[0] for t in ttfa], [t[1] for t in ttfa], [t[2] for t in ttfa], color=line.get_color(), alpha=0.15)
    for axis, ylabel, heading in (
        (left, "audio seconds per wall second (x real-time)", "Throughput"),
        (right, "TTFA ms (line p50, band to p95)", "Time to first audio"),
    ):
        axis.set_xscale("log", base=2)
        axis.set_xticks(sorted({r.concurrency for r in rows}), labels=[str(c) for c in sorted({r.concurrency for r in rows})])
        axis.set_xlabel("concurrent requests")
        axis.set_ylabel(ylabel)
        axis.set_title(heading)
        axis.set_ylim(bottom=0)
        axis.grid(True, alpha=0.3)
        axis.legend()
    if title:
        fig.suptitle(f"omni bench: {title}")
    fig.savefig(path, dpi=120)
    plt.close(fig)
