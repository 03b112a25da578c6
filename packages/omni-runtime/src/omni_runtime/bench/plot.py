"""``omni bench --plot``: throughput and time to first audio against concurrency, and TTFA and
underruns against offered rate (open loop), per topology.

Closed loop: two panels side by side share the concurrency axis (log scale: 1, 8, 32 ...): audio
seconds produced per wall second, and TTFA p50 with the p95 as a lighter band. Open loop: TTFA
p50 and p95, and underruns per request, against the offered rate. Each topology (and text
length, when several were measured) is one line, so the topologies compare at a glance.
matplotlib is an optional extra (``pip install 'omni-runtime[plot]'``); ``omni bench`` checks
for it before running anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _series(rows: Sequence[Any]) -> dict[str, list[Any]]:
    lengths = sorted({r.text_chars for r in rows})
    series: dict[str, list[Any]] = {}
    for r in rows:
        label = r.topology if len(lengths) == 1 else f"{r.topology}, {r.text_chars} chars"
        series.setdefault(label, []).append(r)
    return series


def _closed(left: Any, right: Any, rows: Sequence[Any]) -> None:
    for label, points in _series(rows).items():
        points = sorted(points, key=lambda r: r.concurrency)
        xs = [r.concurrency for r in points]
        (line,) = left.plot(xs, [r.audio_s_per_s for r in points], marker="o", label=label)
        ttfa = [(r.concurrency, r.ttfa_p50_s * 1000, (r.ttfa_p95_s or r.ttfa_p50_s) * 1000) for r in points if r.ttfa_p50_s is not None]
        if ttfa:
            right.plot([t[0] for t in ttfa], [t[1] for t in ttfa], marker="o", color=line.get_color(), label=label)
            right.fill_between([t[0] for t in ttfa], [t[1] for t in ttfa], [t[2] for t in ttfa], color=line.get_color(), alpha=0.15)
    ticks = sorted({r.concurrency for r in rows})
    for axis, ylabel, heading in (
        (left, "audio seconds per wall second (x real-time)", "Throughput"),
        (right, "TTFA ms (line p50, band to p95)", "Time to first audio"),
    ):
        axis.set_xscale("log", base=2)
        axis.set_xticks(ticks, labels=[str(c) for c in ticks])
        axis.set_xlabel("concurrent requests")
        axis.set_ylabel(ylabel)
        axis.set_title(heading)


def _open(left: Any, right: Any, rows: Sequence[Any]) -> None:
    for label, points in _series(rows).items():
        points = sorted(points, key=lambda r: r.offered_rate)
        xs = [r.offered_rate for r in points]
        with_ttfa = [r for r in points if r.ttfa_p50_s is not None]
        (line,) = left.plot([r.offered_rate for r in with_ttfa], [r.ttfa_p50_s * 1000 for r in with_ttfa], marker="o", label=f"{label} p50")
        left.plot([r.offered_rate for r in with_ttfa], [(r.ttfa_p95_s or r.ttfa_p50_s) * 1000 for r in with_ttfa], marker="^", linestyle="--", color=line.get_color(), label=f"{label} p95")
        right.plot(xs, [r.underrun_events / max(1, r.requests) for r in points], marker="o", color=line.get_color(), label=label)
    for axis, ylabel, heading in (
        (left, "TTFA ms (solid p50, dashed p95)", "Time to first audio (open loop)"),
        (right, "underruns per request", "Underruns of a real-time listener"),
    ):
        axis.set_xlabel("offered requests per second")
        axis.set_ylabel(ylabel)
        axis.set_title(heading)


def plot_rows(rows: Sequence[Any], path: str, *, title: str = "") -> None:
    """Closed-loop rows against concurrency, open-loop rows against offered rate (a panel pair each)."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    closed = [r for r in rows if getattr(r, "offered_rate", None) is None]
    opened = [r for r in rows if getattr(r, "offered_rate", None) is not None]
    pairs = int(bool(closed)) + int(bool(opened))
    fig, axes = plt.subplots(pairs, 2, figsize=(11, 4.2 * pairs), constrained_layout=True, squeeze=False)
    row = 0
    if closed:
        _closed(axes[row][0], axes[row][1], closed)
        row += 1
    if opened:
        _open(axes[row][0], axes[row][1], opened)
    for axis in axes.flat:
        axis.set_ylim(bottom=0)
        axis.grid(True, alpha=0.3)
        axis.legend()
    if title:
        fig.suptitle(f"omni bench: {title}")
    fig.savefig(path, dpi=120)
    plt.close(fig)
