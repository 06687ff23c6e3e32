"""The report's plots, frame in and inline SVG out: progress (every candidate and the best so far beside the
baselines), the per-shape heatmap against the best seed, and failures per generation.

Matplotlib is used through `Figure` alone (no pyplot), so no GUI backend or global state is involved. The plots are
SVG with their text kept as text, so that the page can be searched, its labels measured (tests/test_report_layout.py
checks that none overlap) and read at any zoom. A simulated run's plots carry a title saying so (`finish`).
"""

from __future__ import annotations

import io
import re

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.text import Text

from ksci.lineage.store import shape_times
from ksci.report.facts import STATUS_COLOURS, STATUS_ORDER, baseline, family, generation_summary, short_id, timed
from ksci.report.wording import SIMULATED_NOTE

BASELINES = (  # column, label, colour: the horizontal lines of the progress plot
    ("reference_geomean_us", "reference (PyTorch)", "#c62828"),
    ("vendor_geomean_us", "vendor library", "#1565c0"),
    ("speed_of_light_geomean_us", "speed of light", "#000000"),
)
SIMULATED_COLOUR = "#b45309"  # the amber of the page's simulated banner


def finish(fig: Figure, name: str, simulated: bool) -> str:
    """The figure as SVG markup to inline in the page, titled as simulated where its numbers were made up.

    Text stays text (svg.fonttype none). Ids are salted with `name`, so that the page's several plots do not share
    one; no XML prolog and no namespace URLs (the HTML parser gives inline SVG its namespace), and `href` in place
    of `xlink:href`, so the page names no address. No date in the metadata: the same lineage gives the same bytes.
    """
    if simulated:
        fig.suptitle(SIMULATED_NOTE, color=SIMULATED_COLOUR, fontsize=10, weight="bold")
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        fig.savefig(
            buffer,
            format="svg",
            bbox_inches="tight",
            metadata={"Date": None, "Creator": None, "Format": None, "Type": None},
        )
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", svg, count=2).replace("xlink:href=", "href=")
    return svg.replace("<svg ", f'<svg class="plot" id="plot-{name}" role="img" ', 1)


def drop_overlapping(fig: Figure, texts: list[Text], margin_px: float = 3.0) -> None:
    """Hide each text whose box meets a text kept before it (`texts` in order of importance): a label that would
    sit on another one is left out rather than drawn illegibly."""
    FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    kept = []
    for text in texts:
        box = text.get_window_extent(renderer).expanded(1.0, 1.0).padded(margin_px)
        if any(box.overlaps(other) for other in kept):
            text.set_visible(False)
        else:
            kept.append(box)


def _spread(n: int, width: float = 0.5) -> np.ndarray:
    return np.zeros(1) if n == 1 else np.linspace(-width / 2, width / 2, n)


def _jittered(frame: pd.DataFrame) -> pd.Series:
    """Each candidate's x: its generation, spread sideways so that a generation's dots do not overlap."""
    x = frame["generation"].astype(float)
    for _, group in frame.groupby("generation"):
        x[group.index] += _spread(len(group))
    return x


def _dots(ax, frame: pd.DataFrame, x: pd.Series, failed_at: float | None) -> None:
    """Every candidate as a dot coloured by status; untimed ones at `failed_at` (None: left out)."""
    for status in [s for s in STATUS_ORDER[::-1] if s in set(frame["status"])]:
        rows = frame[frame["status"] == status]
        ys = rows["geomean_us"].fillna(failed_at) if failed_at else rows["geomean_us"]
        rows, ys, marker = rows[ys.notna()], ys[ys.notna()], "o" if status == "ok" else "X"
        ax.scatter(x[rows.index], ys, s=44, c=STATUS_COLOURS.get(status, "#333"), marker=marker, label=status, zorder=3)


def _best_step(ax, frame: pd.DataFrame, annotate: bool) -> list[Text]:
    """The best so far as a step line to the end of the last generation; `annotate` labels each new best (the
    labels are returned, the latest first: the one to keep where two would meet)."""
    summary = generation_summary(frame).dropna(subset=["best_so_far_us"])
    if summary.empty:
        return []
    last = summary["generation"].max()
    xs, ys = [*summary["generation"], last + 0.4], [*summary["best_so_far_us"], summary["best_so_far_us"].iloc[-1]]
    ax.step(xs, ys, where="post", color="#2e7d32", lw=2.5, alpha=0.8, zorder=2, label="best so far")
    new = summary[summary["best_so_far_id"] != summary["best_so_far_id"].shift(1)]
    labels = []
    for _, g in new.iterrows() if annotate else ():
        right = g["generation"] > last / 2  # keep the label inside the axes
        label = ax.annotate(
            f"{g['best_so_far_us']:.1f} µs {short_id(g['best_so_far_id'])}",
            (g["generation"], g["best_so_far_us"]),
            textcoords="offset points",
            xytext=(-4 if right else 4, -16),
            ha="right" if right else "left",
            fontsize=9,
            color="#1b5e20",
            weight="bold",
        )
        labels.append(label)
    return labels[::-1]


def plot_progress(frame: pd.DataFrame, simulated: bool = False) -> str:
    """Left: every candidate and the best so far (log scale) beside the baselines. Right: a zoom on the best."""
    fig = Figure(figsize=(12, 5), layout="constrained")
    ax, zoom = fig.subplots(1, 2, width_ratios=[3, 2])
    x, last = _jittered(frame), int(frame["generation"].max())
    levels = [(baseline(frame, column), label, colour) for column, label, colour in BASELINES]
    known = [*frame["geomean_us"].dropna(), *(v for v, _, _ in levels if v)]
    top = max(known, default=1.0) * 3
    _dots(ax, frame, x, failed_at=top)
    _best_step(ax, frame, annotate=False)
    for level, label, colour in levels:  # named in the legend with their times: labels in the axes could meet
        if level:
            ax.axhline(level, color=colour, ls="--", lw=1.2, zorder=1, label=f"{label} {level:.1f} µs")
    if frame["geomean_us"].isna().any():
        ax.axhline(top / 1.7, color="#bbb", lw=0.8)
        ax.text(last + 0.45, top * 1.2, "failed: no time", fontsize=8, color="#666", va="bottom", ha="right")
    ax.set_yscale("log")
    ax.set_ylim(min(known, default=1.0) / 1.6, top * 1.8)
    ax.set_ylabel("geomean over benchmark shapes, µs (log)")
    ax.set_title("every candidate, with the baselines", fontsize=10)
    fastest, labels = timed(frame), []
    if not fastest.empty:
        limit = fastest["geomean_us"].iloc[0] * 1.35
        _dots(zoom, frame[frame["geomean_us"] <= limit], x, failed_at=None)
        labels = _best_step(zoom, frame, annotate=True)
        zoom.set_title("zoom: candidates within 35% of the best", fontsize=10)
        zoom.set_ylabel("µs (linear)")
        zoom.set_ylim(fastest["geomean_us"].iloc[0] * 0.95, limit * 1.02)
    for a in (ax, zoom):
        a.set_xlim(-0.5, last + 0.5)
        a.set_xticks(range(0, last + 1, max(1, (last + 10) // 10)))  # at most about 10 ticks: numbers stay apart
        a.set_xlabel("generation")
        a.grid(axis="y", alpha=0.25)
    handles, names = ax.get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=min(len(names), 6), fontsize=9, frameon=False)
    drop_overlapping(fig, labels)
    return finish(fig, "progress", simulated)


def shape_speedups(frame: pd.DataFrame) -> pd.DataFrame:
    """Per passing candidate (rows) and benchmark shape (columns): the best seed's time on that shape / its time."""
    fastest = timed(frame).sort_values(["generation", "geomean_us"], kind="stable")
    table = pd.DataFrame(
        [shape_times(s) for s in fastest["shape_times_json"]],
        index=[
            f"g{g} {short_id(c)} {t}"
            for g, c, t in zip(
                fastest["generation"], fastest["candidate_id"], fastest.apply(family, axis=1), strict=True
            )
        ],
    )
    if table.empty:
        return table
    table = table[sorted(table.columns, key=lambda k: [int(p) if p.isdigit() else p for p in re.split(r"x", k)])]
    seeds = table[(fastest["generation"] == fastest["generation"].min()).to_numpy()]
    return seeds.min() / table


def plot_shape_heatmap(frame: pd.DataFrame, simulated: bool = False) -> str:
    """Speed-up per shape over the best seed on that shape: green faster, red slower, colours clipped at 2x."""
    table = shape_speedups(frame)
    fig = Figure(figsize=(12, max(2.5, 0.34 * len(table) + 2.4)), layout="constrained")
    ax = fig.subplots()
    if table.empty:
        ax.text(0.5, 0.5, "no candidate passed", ha="center", transform=ax.transAxes)
        return finish(fig, "shapes", simulated)
    image = ax.imshow(table.to_numpy(), cmap="RdYlGn", norm=LogNorm(0.5, 2.0), aspect="auto")
    for (i, j), value in np.ndenumerate(table.to_numpy()):
        if np.isfinite(value):
            dark = value < 0.6 or value > 1.7
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color="white" if dark else "black")
    ax.set_xticks(
        range(len(table.columns)), [c.replace("x", "×") for c in table.columns], rotation=45, ha="right", fontsize=8
    )
    ax.set_yticks(range(len(table)), table.index, fontsize=8, family="monospace")
    ax.set_xlabel("benchmark shape M×N×K")
    colorbar = fig.colorbar(image, ax=ax, pad=0.01, fraction=0.03, ticks=[0.5, 0.67, 0.8, 1, 1.25, 1.5, 2])
    colorbar.ax.set_yticklabels(["≤0.5", "0.67", "0.8", "1", "1.25", "1.5", "≥2"])
    colorbar.minorticks_off()
    colorbar.set_label("× best seed on this shape")
    return finish(fig, "shapes", simulated)


def plot_failures(frame: pd.DataFrame, simulated: bool = False) -> str:
    """Candidates per status per generation, stacked (passes at the bottom)."""
    counts = frame.groupby(["generation", "status"]).size().unstack(fill_value=0)
    statuses = [s for s in STATUS_ORDER[::-1] if s in counts.columns]  # ok first, then the late failures
    fig = Figure(figsize=(10, 2.8), layout="constrained")
    ax = fig.subplots()
    bottom = np.zeros(len(counts))
    for status in statuses:
        ax.bar(counts.index, counts[status], 0.6, bottom, color=STATUS_COLOURS.get(status, "#333"), label=status)
        bottom += counts[status].to_numpy()
    ax.set_xticks(counts.index)
    ax.set_xlabel("generation")
    ax.set_ylabel("candidates")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    return finish(fig, "failures", simulated)
