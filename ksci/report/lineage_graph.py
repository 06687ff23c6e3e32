"""The lineage graph: candidates placed by generation and rank, with an arrow from each parent to its child.

Green arrows and notes mark the children that beat their parent; the black ring is the best kernel.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from ksci.report.facts import STATUS_COLOURS, by_id, faster_than_parent, short_hypothesis, short_id, timed
from ksci.report.plots import png_of

ARROW = {"arrowstyle": "-|>", "shrinkA": 7, "shrinkB": 7, "connectionstyle": "arc3,rad=0.08"}  # lineage edges
LABEL = {"bbox": {"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 0.5}, "zorder": 4}  # over edges


def lineage_layout(frame: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Node positions: x is the generation, y the rank within it (fastest at the top, failures at the bottom)."""
    positions = {}
    for generation, group in frame.groupby("generation"):
        order = group.sort_values(["geomean_us", "candidate_id"], na_position="last", kind="stable")
        for rank, cid in enumerate(order["candidate_id"]):
            positions.setdefault(cid, (float(generation), -float(rank)))
    return positions


def plot_lineage(frame: pd.DataFrame) -> bytes:
    """Candidates by generation with parent edges; green edges and notes mark children faster than the parent."""
    rows, at = by_id(frame), lineage_layout(frame)
    height = max(3.0, 0.95 * frame.groupby("generation").size().max() + 1.0) if not frame.empty else 3.0
    fig = Figure(figsize=(13, height))
    ax = fig.subplots()
    better = {r["candidate_id"] for r in faster_than_parent(frame)}
    for cid, row in rows.items():
        parent = row["parent_id"]
        if isinstance(parent, str) and parent in at:
            style = {"color": "#2e7d32", "lw": 2.2} if cid in better else {"color": "#bbb", "lw": 0.9}
            ax.annotate("", at[cid], at[parent], zorder=1, arrowprops={**ARROW, **style})
    fast = [r for r in rows.values() if pd.notna(r["geomean_us"])]
    if fast:  # colours span the best to 1.35x the best (the tuning range); slower kernels are all darkest
        low = min(r["geomean_us"] for r in fast)
        xs, ys = zip(*(at[r["candidate_id"]] for r in fast), strict=True)
        times_us = [r["geomean_us"] for r in fast]
        points = ax.scatter(xs, ys, c=times_us, cmap="viridis_r", vmin=low, vmax=1.35 * low, s=130, zorder=3, ec="#333")
        fig.colorbar(points, ax=ax, pad=0.01, fraction=0.03, extend="max", label="geomean µs (brighter is faster)")
    best = timed(frame)["candidate_id"].head(1).tolist()
    for r in rows.values():
        x, y = at[r["candidate_id"]]
        if pd.isna(r["geomean_us"]):
            ax.scatter([x], [y], marker="X", s=110, c=STATUS_COLOURS.get(r["status"], "#333"), zorder=3)
            label = f"{short_id(r['candidate_id'])}  {r['status']}"
        else:
            label = f"{short_id(r['candidate_id'])}  {r['geomean_us']:.1f} µs"
        bold = {"weight": "bold"} if r["candidate_id"] in best else {}
        ax.text(x + 0.08, y + 0.05, label, fontsize=8.5, va="bottom", family="monospace", **LABEL, **bold)
        if isinstance(r["parent_id"], str):  # what the experiment changed; green where it beat the parent
            style = {"color": "#1b5e20", "weight": "bold"} if r["candidate_id"] in better else {"color": "#777"}
            ax.text(x + 0.08, y - 0.05, short_hypothesis(r["hypothesis"], 34), fontsize=7.5, va="top", **LABEL, **style)
    if best:
        ax.scatter(*at[best[0]], s=460, facecolors="none", edgecolors="black", linewidths=2.2, zorder=2)
    last = int(frame["generation"].max()) if not frame.empty else 0
    ax.set_xlim(-0.25, last + 0.95)
    ax.set_ylim(min([y for _, y in at.values()], default=0) - 0.6, 0.6)
    ax.set_xticks(range(last + 1))
    ax.set_xlabel("generation")
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    return png_of(fig)
