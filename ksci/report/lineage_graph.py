"""The lineage graph: a row per generation (the first at the top), candidates ranked fastest first along it, with an
arrow from each parent to its child.

Generations run down the page because a page grows downwards: a long run makes the graph taller, never narrower,
so its labels keep their size (at 10 generations of 12, a graph with generations across the page had to shrink or
overlap them). Each node carries its short id, its time (or status) and the short form of its hypothesis, stacked
under it in the width of one column; a hypothesis that would still meet another label is left out (the list above
the graph and the table give them in full). Green arrows and hypotheses mark the children that beat their parent;
the black ring is the best kernel.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from ksci.report.facts import STATUS_COLOURS, by_id, faster_than_parent, short_hypothesis, short_id, timed
from ksci.report.plots import drop_overlapping, finish

ARROW = {"arrowstyle": "-|>", "shrinkA": 7, "shrinkB": 7, "connectionstyle": "arc3,rad=0.08"}  # lineage edges
LABEL = {"bbox": {"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 0.3}, "zorder": 4}  # over edges
COLUMN_IN = 1.0  # the width of one candidate's column, inches
ROW_IN = 0.95  # the height of one generation's row: the node and three lines of labels
HYPOTHESIS_PT = 7.0
CHAR_EM = 0.56  # an average DejaVu Sans character, in ems: how many characters of hypothesis fit in a column


def lineage_layout(frame: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Node positions: x the rank within the generation (fastest at the left, failures at the right), y minus the
    generation (the seeds at the top)."""
    positions = {}
    for generation, group in frame.groupby("generation"):
        order = group.sort_values(["geomean_us", "candidate_id"], na_position="last", kind="stable")
        for rank, cid in enumerate(order["candidate_id"]):
            positions.setdefault(cid, (float(rank), -float(generation)))
    return positions


def plot_lineage(frame: pd.DataFrame, simulated: bool = False) -> str:
    """Candidates by generation with parent edges; green edges and notes mark children faster than the parent."""
    rows, at = by_id(frame), lineage_layout(frame)
    columns = max((int(x) + 1 for x, _ in at.values()), default=1)
    generations = int(frame["generation"].max()) + 1 if not frame.empty else 1
    fig = Figure(figsize=(max(8.0, COLUMN_IN * columns + 2.2), max(3.0, ROW_IN * generations + 1.2)))
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
    hypotheses = _labels(ax, rows, at, better, best, int(72 * COLUMN_IN * 0.92 / (CHAR_EM * HYPOTHESIS_PT)))
    if best:
        ax.scatter(*at[best[0]], s=460, facecolors="none", edgecolors="black", linewidths=2.2, zorder=2)
    ax.set_xlim(-0.5, columns - 0.5)
    ax.set_ylim(-(generations - 1) - 0.75, 0.35)
    ax.set_yticks([-g for g in range(generations)], [str(g) for g in range(generations)])
    ax.set_ylabel("generation")
    ax.set_xticks([])
    ax.set_xlabel("candidates of a generation, fastest at the left (failures at the right)")
    for side in ("right", "top", "bottom"):
        ax.spines[side].set_visible(False)
    drop_overlapping(fig, hypotheses)
    return finish(fig, "lineage", simulated)


def _labels(ax, rows: dict, at: dict, better: set[str], best: list[str], width: int) -> list:
    """Under each node: its short id, its time or status, and its hypothesis cut to `width` characters; returns
    the hypotheses (what may be left out where labels would meet)."""
    hypotheses = []
    for r in rows.values():
        cid = r["candidate_id"]
        x, y = at[cid]
        if pd.isna(r["geomean_us"]):
            ax.scatter([x], [y], marker="X", s=110, c=STATUS_COLOURS.get(r["status"], "#333"), zorder=3)
            value = str(r["status"])
        else:
            value = f"{r['geomean_us']:.1f} µs"
        bold = {"weight": "bold"} if cid in best else {}
        for offset, text in ((-9, short_id(cid)), (-19, value)):
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(0, offset), ha="center", va="top",
                        fontsize=7.5, family="monospace", **LABEL, **bold)  # fmt: skip
        if isinstance(r["parent_id"], str):  # what the experiment changed; green where it beat the parent
            style = {"color": "#1b5e20", "weight": "bold"} if cid in better else {"color": "#666"}
            note = ax.annotate(
                short_hypothesis(_without_family(r), width), (x, y), textcoords="offset points", xytext=(0, -29),
                ha="center", va="top", fontsize=HYPOTHESIS_PT, **LABEL, **style,
            )  # fmt: skip
            hypotheses.append(note)
    return hypotheses


def _without_family(row: pd.Series) -> str:
    """The hypothesis without its leading "template: " (the tuning proposer's form): the change itself fits."""
    text, template = row["hypothesis"] or "", row["template"]
    prefix = f"{template}: " if isinstance(template, str) else None
    return text[len(prefix) :] if prefix and text.startswith(prefix) else text
