"""The evolution report: one self-contained HTML page built from a run's lineage, and its terminal summary.

Pure functions over the frame that `LineageStore.read(run)` returns: `build_report(frame, read_source)` gives the
HTML (plots inline as base64 PNG, no network), each `plot_*` gives PNG bytes, `format_status` the text of
`ksci status`. Matplotlib is used through `Figure` alone (no pyplot), so no GUI backend or global state is involved.
"""

from __future__ import annotations

import base64
import difflib
import html
import io
import json
import re
from collections.abc import Callable

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from ksci.evaluate.results import Status

STATUS_ORDER = [str(s) for s in Status]
STATUS_COLOURS = {
    "ok": "#2e7d32",
    "suspicious": "#8e24aa",
    "wrong": "#ef6c00",
    "timeout": "#6d4c41",
    "runtime_error": "#c62828",
    "load_error": "#ad1457",
    "compile_error": "#9e9e9e",
    "rejected": "#424242",
    "compiled": "#1565c0",
}
ARROW = {"arrowstyle": "-|>", "shrinkA": 7, "shrinkB": 7, "connectionstyle": "arc3,rad=0.08"}  # lineage edges
LABEL = {"bbox": {"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 0.5}, "zorder": 4}  # over edges
BASELINES = (  # column, label, colour: the horizontal lines of the progress plot
    ("reference_geomean_us", "reference (PyTorch)", "#c62828"),
    ("vendor_geomean_us", "vendor library", "#1565c0"),
    ("speed_of_light_geomean_us", "speed of light", "#000000"),
)


# --- What the run did -------------------------------------------------------------------------------------------


def timed(frame: pd.DataFrame) -> pd.DataFrame:
    """The candidates that passed and have a time, fastest first."""
    ok = frame[(frame["status"] == "ok") & frame["geomean_us"].notna()]
    return ok.sort_values(["geomean_us", "candidate_id"], kind="stable")


def by_id(frame: pd.DataFrame) -> dict[str, pd.Series]:
    """Each candidate's first row (a kernel proposed again in a later generation keeps its first record)."""
    return {row["candidate_id"]: row for _, row in frame.iloc[::-1].iterrows()}


def generation_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per generation: candidates, a count per status, the generation's best and the best so far."""
    rows, best = [], None
    for generation, group in frame.groupby("generation", sort=True):
        fastest = timed(group)
        gen_best = fastest.iloc[0] if not fastest.empty else None
        if gen_best is not None and (best is None or gen_best["geomean_us"] < best["geomean_us"]):
            best = gen_best
        rows.append(
            {
                "generation": int(generation),
                "candidates": len(group),
                **group["status"].value_counts().to_dict(),
                "best_us": None if gen_best is None else gen_best["geomean_us"],
                "best_id": None if gen_best is None else gen_best["candidate_id"],
                "best_so_far_us": None if best is None else best["geomean_us"],
                "best_so_far_id": None if best is None else best["candidate_id"],
            }
        )
    return pd.DataFrame(rows)


def new_bests(frame: pd.DataFrame) -> list[pd.Series]:
    """The candidates that lowered the best-so-far after the seeds (at most one per generation)."""
    summary, rows = generation_summary(frame), by_id(frame)
    previous = summary["best_so_far_id"].shift(1)
    changed = summary[(summary["generation"] > 0) & summary["best_so_far_id"].notna()]
    changed = changed[changed["best_so_far_id"] != previous[changed.index]]
    return [rows[cid] for cid in changed["best_so_far_id"]]


def faster_than_parent(frame: pd.DataFrame) -> list[pd.Series]:
    """Children that passed and beat their (passing) parent: the experiments that worked."""
    rows, found = by_id(frame), []
    for _, row in timed(frame).sort_values(["generation", "geomean_us"]).iterrows():
        parent = rows.get(row["parent_id"]) if isinstance(row["parent_id"], str) else None
        if parent is not None and pd.notna(parent["geomean_us"]) and row["geomean_us"] < parent["geomean_us"]:
            found.append(row)
    return found


def ancestry(frame: pd.DataFrame, candidate_id: str) -> list[pd.Series]:
    """The chain of parents from a seed down to this candidate."""
    rows, chain = by_id(frame), []
    while isinstance(candidate_id, str) and candidate_id in rows and len(chain) < len(rows):
        chain.append(rows[candidate_id])
        candidate_id = rows[candidate_id]["parent_id"]
    return chain[::-1]


def baseline(frame: pd.DataFrame, column: str) -> float | None:
    """A baseline's geomean over the run (it is re-timed beside every candidate; the median is robust)."""
    values = frame[column].dropna()
    return float(values.median()) if not values.empty else None


def noise(frame: pd.DataFrame) -> float | None:
    """Run-to-run spread of the reference's geomean, (max - min) / median: smaller differences are noise."""
    values = frame["reference_geomean_us"].dropna()
    return float((values.max() - values.min()) / values.median()) if len(values) > 1 else None


def short_id(candidate_id: str) -> str:
    return candidate_id[:8]


def composition(row: pd.Series) -> dict | None:
    """A composed candidate's plan (ksci.problem.compose), or None for every other row (and rows of old lineages)."""
    text = row.get("params_by_shape_json")
    return json.loads(text) if isinstance(text, str) else None


def family(row: pd.Series) -> str:
    """What the candidate is made of: its template, "composed of N points", or nothing for a free-form kernel."""
    plan = composition(row)
    if plan is not None:
        return f"composed of {len(_variants(plan))} points"
    return row["template"] if isinstance(row["template"], str) else ""


def describe(row: pd.Series) -> str:
    """The family and the parameters, in one phrase."""
    return " ".join(part for part in (family(row), short_params(row["params_json"])) if part)


def _variants(plan: dict) -> list[str]:
    points = [plan["default"], *plan["shapes"].values()]
    return list(dict.fromkeys(f"{p['template']} {short_params(json.dumps(p['params']))}" for p in points))


def short_params(params_json) -> str:
    if not isinstance(params_json, str):
        return ""
    return " ".join(f"{k}={v}" for k, v in json.loads(params_json).items())


def short_hypothesis(text: str, width: int = 40) -> str:
    """The hypothesis without its bracketed provenance, cut to `width` characters."""
    text = re.split(r" \((?:neighbour|parent)", text or "")[0]
    return text if len(text) <= width else text[: width - 1] + "…"


def short_message(text: str) -> str:
    """The message with absolute paths (compile-cache temp folders) cut down to the file name."""
    return re.sub(r"(?<![\w.])/\S*/", "", text or "")


def headline_facts(frame: pd.DataFrame) -> dict | None:
    """Best kernel, its ratios, and how far it moved from the seeds; None when nothing passed."""
    fastest = timed(frame)
    if fastest.empty:
        return None
    best = fastest.iloc[0]
    seeds = timed(frame[frame["generation"] == frame["generation"].min()])
    sol = best["speed_of_light_geomean_us"]
    return {
        "best": best,
        "best_seed": seeds.iloc[0] if not seeds.empty else None,
        "slowest_seed": seeds.iloc[-1] if not seeds.empty else None,
        "sol_fraction": sol / best["geomean_us"] if pd.notna(sol) else None,
        "chain": ancestry(frame, best["candidate_id"]),
    }


def device(frame: pd.DataFrame) -> str:
    """Where the run was measured: the GPU and architecture (failed rows may lack them), else the target."""
    gpus, arches = frame["gpu"].dropna(), frame["arch"].dropna()
    where = gpus.iloc[0] if not gpus.empty else frame["target"].iloc[0]
    return f"{where} ({arches.iloc[0]})" if not arches.empty else where


def times(x: float) -> str:
    """A speed ratio in words: 4.26x faster, or 4.9x slower for ratios below 1."""
    if x is None or pd.isna(x):
        return "n/a"
    return f"{x:.2f}x faster" if x >= 1 else f"{1 / x:.1f}x slower"


# --- The terminal summary (ksci status) -------------------------------------------------------------------------


def format_status(frame: pd.DataFrame, run: str) -> str:
    if frame.empty:
        return f"run {run}: no candidates recorded"
    summary = generation_summary(frame)
    statuses = [s for s in STATUS_ORDER[::-1] if s in summary.columns]
    lines = [
        f"run {run}: {frame['problem'].iloc[0]} on {device(frame)}, "
        f"{len(frame)} candidates in {len(summary)} generations, "
        f"{frame['created_at'].min():%Y-%m-%d %H:%M} to {frame['created_at'].max():%H:%M} UTC",
        f"{'gen':>4s} {'cands':>5s} "
        + " ".join(f"{s:>{max(len(s), 3)}s}" for s in statuses)
        + f" {'gen best us':>11s} {'best so far us':>14s}  best so far",
    ]
    for _, g in summary.iterrows():
        counts = " ".join(f"{_count(g.get(s)):>{max(len(s), 3)}d}" for s in statuses)
        lines.append(
            f"{g['generation']:>4d} {g['candidates']:>5d} {counts} {_num(g['best_us']):>11s} "
            f"{_num(g['best_so_far_us']):>14s}  {g['best_so_far_id'] or '-'}"
        )
    facts = headline_facts(frame)
    if facts is None:
        return "\n".join([*lines, "no candidate passed"])
    best = facts["best"]
    lines += [
        f"best: {best['candidate_id']} (generation {best['generation']}, {describe(best) or 'no template'})",
        f"  geomean {best['geomean_us']:.2f} us: {times(best['speedup_vs_reference'])} than the reference "
        f"({_num(best['reference_geomean_us'])} us), {times(best['speedup_vs_vendor'])} than the vendor library "
        f"({_num(best['vendor_geomean_us'])} us), {_percent(facts['sol_fraction'])} of the speed of light",
    ]
    for name, seed in (("best seed", facts["best_seed"]), ("slowest seed", facts["slowest_seed"])):
        if seed is not None:
            lines.append(
                f"  {seed['geomean_us'] / best['geomean_us']:.2f}x the {name} "
                f"({seed['candidate_id']} {seed['template']}, {seed['geomean_us']:.2f} us)"
            )
    lines.append(f"  hypothesis: {best['hypothesis']}")
    return "\n".join(lines)


def _count(value) -> int:
    return 0 if value is None or pd.isna(value) else int(value)


def _num(x) -> str:
    return "-" if x is None or pd.isna(x) else f"{x:.2f}"


def _percent(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


# --- Plots: frame in, PNG bytes out -----------------------------------------------------------------------------


def png_of(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    # No Software tag: the same lineage gives the same bytes, so a committed example diffs cleanly.
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return buffer.getvalue()


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


def _best_step(ax, frame: pd.DataFrame, annotate: bool) -> None:
    """The best so far as a step line to the end of the last generation; `annotate` labels each new best."""
    summary = generation_summary(frame).dropna(subset=["best_so_far_us"])
    if summary.empty:
        return
    last = summary["generation"].max()
    xs, ys = [*summary["generation"], last + 0.4], [*summary["best_so_far_us"], summary["best_so_far_us"].iloc[-1]]
    ax.step(xs, ys, where="post", color="#2e7d32", lw=2.5, alpha=0.8, zorder=2, label="best so far")
    new = summary[summary["best_so_far_id"] != summary["best_so_far_id"].shift(1)]
    for _, g in new.iterrows() if annotate else ():
        right = g["generation"] > last / 2  # keep the label inside the axes
        ax.annotate(
            f"{g['best_so_far_us']:.1f} µs {short_id(g['best_so_far_id'])}",
            (g["generation"], g["best_so_far_us"]),
            textcoords="offset points",
            xytext=(-4 if right else 4, -16),
            ha="right" if right else "left",
            fontsize=9,
            color="#1b5e20",
            weight="bold",
        )


def plot_progress(frame: pd.DataFrame) -> bytes:
    """Left: every candidate and the best so far (log scale) beside the baselines. Right: a zoom on the best."""
    fig = Figure(figsize=(12, 5), layout="constrained")
    ax, zoom = fig.subplots(1, 2, width_ratios=[3, 2])
    x, last = _jittered(frame), int(frame["generation"].max())
    levels = [(baseline(frame, column), label, colour) for column, label, colour in BASELINES]
    known = [*frame["geomean_us"].dropna(), *(v for v, _, _ in levels if v)]
    top = max(known, default=1.0) * 3
    _dots(ax, frame, x, failed_at=top)
    _best_step(ax, frame, annotate=False)
    for level, label, colour in levels:
        if level:
            ax.axhline(level, color=colour, ls="--", lw=1.2, zorder=1)
            ax.text(-0.45, level * 1.06, f"{label} {level:.1f} µs", fontsize=9, color=colour, va="bottom")
    if frame["geomean_us"].isna().any():
        ax.axhline(top / 1.7, color="#bbb", lw=0.8)
        ax.text(last + 0.45, top * 1.2, "failed: no time", fontsize=8, color="#666", va="bottom", ha="right")
    ax.set_yscale("log")
    ax.set_ylim(min(known, default=1.0) / 1.6, top * 1.8)
    ax.set_ylabel("geomean over benchmark shapes, µs (log)")
    ax.set_title("every candidate, with the baselines", fontsize=10)
    fastest = timed(frame)
    if not fastest.empty:
        limit = fastest["geomean_us"].iloc[0] * 1.35
        _dots(zoom, frame[frame["geomean_us"] <= limit], x, failed_at=None)
        _best_step(zoom, frame, annotate=True)
        zoom.set_title("zoom: candidates within 35% of the best", fontsize=10)
        zoom.set_ylabel("µs (linear)")
        zoom.set_ylim(fastest["geomean_us"].iloc[0] * 0.95, limit * 1.02)
    for a in (ax, zoom):
        a.set_xlim(-0.5, last + 0.5)
        a.set_xticks(range(last + 1))
        a.set_xlabel("generation")
        a.grid(axis="y", alpha=0.25)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=9, frameon=False)
    return png_of(fig)


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


def shape_speedups(frame: pd.DataFrame) -> pd.DataFrame:
    """Per passing candidate (rows) and benchmark shape (columns): the best seed's time on that shape / its time."""
    fastest = timed(frame).sort_values(["generation", "geomean_us"], kind="stable")
    table = pd.DataFrame(
        [json.loads(s) for s in fastest["shape_times_json"]],
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


def plot_shape_heatmap(frame: pd.DataFrame) -> bytes:
    """Speed-up per shape over the best seed on that shape: green faster, red slower, colours clipped at 2x."""
    table = shape_speedups(frame)
    fig = Figure(figsize=(12, max(2.5, 0.34 * len(table) + 2.4)))
    ax = fig.subplots()
    if table.empty:
        ax.text(0.5, 0.5, "no candidate passed", ha="center", transform=ax.transAxes)
        return png_of(fig)
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
    return png_of(fig)


def plot_failures(frame: pd.DataFrame) -> bytes:
    """Candidates per status per generation, stacked (passes at the bottom)."""
    counts = frame.groupby(["generation", "status"]).size().unstack(fill_value=0)
    statuses = [s for s in STATUS_ORDER[::-1] if s in counts.columns]  # ok first, then the late failures
    fig = Figure(figsize=(10, 2.8))
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
    return png_of(fig)


# --- The HTML page ----------------------------------------------------------------------------------------------

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;margin:0;background:#f6f6f4}
main{max-width:1320px;margin:0 auto;padding:18px 28px 60px;background:#fff}
h1{font-size:24px;margin:6px 0 2px}h2{font-size:19px;margin:34px 0 6px;border-bottom:1px solid #ddd}
.meta,.note{color:#666}.note{font-size:13px;max-width:1000px}
.headline{background:#f1f8f1;border:1px solid #c8e6c9;border-radius:6px;padding:12px 18px;margin:14px 0}
.headline .best{font-size:18px}.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{flex:1 1 0;background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px 12px;min-width:120px}
.card b{display:block;font-size:20px}.card span{color:#555;font-size:12px}
ol.chain{margin:4px 0 4px 0;padding-left:22px}ol.chain li{margin:2px 0}
code,.mono{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12.5px}
img{max-width:100%;height:auto;display:block}
table{border-collapse:collapse;font-size:12.5px;width:100%}
th,td{border:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left}
th{background:#f0f0f0;position:sticky;top:0}td.num{text-align:right;white-space:nowrap}
tr.best td{background:#fff8d6}.status{color:#fff;border-radius:3px;padding:0 5px;white-space:nowrap}
td.msg{font-size:11.5px;color:#555;min-width:220px;word-break:break-word}td.hyp{min-width:200px}
td.params{font-size:11.5px;min-width:170px}.wide{overflow-x:auto}
pre.diff{background:#fafafa;border:1px solid #ddd;padding:8px;overflow-x:auto;font-size:12px;line-height:1.35}
.add{background:#e6ffec;color:#116329}.del{background:#ffebe9;color:#82071e}.hunk{color:#0550ae}
nav a{margin-right:14px}
"""


def build_report(frame: pd.DataFrame, read_source: Callable[[str], str]) -> str:
    """The whole page for one run's lineage; `read_source` maps a row's source_path to the kernel source."""
    if frame.empty:
        return _page("empty run", "<p>No candidates recorded.</p>")
    first = frame.iloc[0]
    title = f"{first['problem']}: run {first['run']}"
    sections = [
        ("progress", "Best so far, generation by generation", _img(plot_progress(frame)), _progress_note(frame)),
        ("lineage", "Lineage: who came from whom", _img(plot_lineage(frame)), _lineage_note(frame)),
        ("shapes", "Per benchmark shape", _img(plot_shape_heatmap(frame)), _shape_note()),
        ("failures", "Failures by class", _img(plot_failures(frame)), _failure_list(frame)),
        ("candidates", "Every candidate", _candidate_table(frame), ""),
        ("diffs", "What changed at each new best", _diffs(frame, read_source), ""),
    ]
    nav = "<nav>" + "".join(f'<a href="#{key}">{html.escape(name)}</a>' for key, name, _, _ in sections) + "</nav>"
    body = [f"<h1>{html.escape(title)}</h1>", _meta(frame), _headline(frame), nav]
    for key, name, content, note in sections:
        body.append(f'<h2 id="{key}">{html.escape(name)}</h2>{note}{content}')
    return _page(title, "\n".join(body))


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{CSS}</style></head><body><main>\n{body}\n</main></body></html>\n"
    )


def _img(png: bytes) -> str:
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _e(value) -> str:
    return "" if value is None or (not isinstance(value, str) and pd.isna(value)) else html.escape(str(value))


def _meta(frame: pd.DataFrame) -> str:
    measured = frame[frame["gpu"].notna()]
    fingerprint = json.loads((measured if not measured.empty else frame)["fingerprint_json"].iloc[0] or "{}")
    parts = [
        _e(device(frame)),
        f"{len(frame)} candidates in {frame['generation'].nunique()} generations",
        "proposers: " + ", ".join(_e(p) for p in frame["proposer"].unique()),
        f"{frame['created_at'].min():%Y-%m-%d %H:%M} to {frame['created_at'].max():%H:%M} UTC",
    ]
    if fingerprint.get("toolchain"):
        parts.append(_e(fingerprint["toolchain"]))
    return f'<p class="meta">{" · ".join(parts)}</p>'


def _card(value: str, label: str) -> str:
    return f'<div class="card"><b>{value}</b><span>{label}</span></div>'


def _headline(frame: pd.DataFrame) -> str:
    facts = headline_facts(frame)
    if facts is None:
        return '<div class="headline"><p class="best">No candidate passed verification.</p></div>'
    best, seed = facts["best"], facts["best_seed"]
    cards = [
        _card(f"{best['geomean_us']:.1f} µs", "geomean over the benchmark shapes"),
        _card(f"{_num(best['speedup_vs_reference'])}×", f"the reference ({_num(best['reference_geomean_us'])} µs)"),
        _card(
            f"{_num(best['speedup_vs_vendor'])}×",
            f"the vendor library ({_num(best['vendor_geomean_us'])} µs): {times(best['speedup_vs_vendor'])}",
        ),
        _card(_percent(facts["sol_fraction"]), f"of the speed of light ({_num(best['speed_of_light_geomean_us'])} µs)"),
    ]
    for name, other in (("best seed", seed), ("slowest seed", facts["slowest_seed"])):
        if other is not None:
            label = (
                f"the {name}, {_e(other['template'])} {short_id(other['candidate_id'])} ({other['geomean_us']:.1f} µs)"
            )
            cards.append(_card(f"{other['geomean_us'] / best['geomean_us']:.2f}×", label))
    if seed is None or seed["candidate_id"] == best["candidate_id"]:
        moved = "no kernel after the seeds beat the best seed"
    else:
        moved = (
            f"the best geomean went from {seed['geomean_us']:.1f} µs (the best seed) to {best['geomean_us']:.1f} µs, "
            f"{100 * (seed['geomean_us'] / best['geomean_us'] - 1):.1f}% faster; the last step was "
            f"<i>{_e(short_hypothesis(best['hypothesis']))}</i>"
        )
    summary = (
        f"In {frame['generation'].nunique()} generations of {len(frame)} candidates, {moved}. The best kernel is "
        f"{times(best['speedup_vs_reference'])} than the reference and {times(best['speedup_vs_vendor'])} than the "
        "vendor library."
    )
    steps, parent_us = [], None
    for r in facts["chain"]:
        change = f" ({100 * (r['geomean_us'] / parent_us - 1):+.1f}% on its parent)" if parent_us else ""
        steps.append(
            f"<li><code>{short_id(r['candidate_id'])}</code> {_num(r['geomean_us'])} µs{change}, generation "
            f"{r['generation']}: {_e(r['hypothesis'])}</li>"
        )
        parent_us = r["geomean_us"]
    spread = noise(frame)
    caution = (
        f'<p class="note">The reference was re-timed beside every candidate; its geomean varied by '
        f"{100 * spread:.1f}% over the run, so differences of that size are noise.</p>"
        if spread is not None
        else ""
    )
    return (
        f'<div class="headline"><p class="best">Best kernel: <code>{_e(best["candidate_id"])}</code> '
        f"({_e(describe(best))}), generation {best['generation']}.</p>"
        f"<p>{summary}</p>"
        f'<div class="cards">{"".join(cards)}</div>'
        f'<p><b>How it got there</b> (each step a parent and the experiment on it):</p><ol class="chain">'
        f"{''.join(steps)}</ol>{caution}</div>"
    )


def _progress_note(frame: pd.DataFrame) -> str:
    return (
        '<p class="note">Every candidate is a dot at its generation (passes as circles, failures as crosses at the '
        "top: they have no time); the green step is the best so far. Dashed lines: the PyTorch reference, the vendor "
        "library and the roofline's speed of light, as geomeans over the same shapes. Lower is faster.</p>"
    )


def _lineage_note(frame: pd.DataFrame) -> str:
    wins, rows = faster_than_parent(frame), by_id(frame)
    items = "".join(
        f"<li><code>{short_id(r['candidate_id'])}</code> {r['geomean_us']:.1f} µs (generation {r['generation']}, "
        f"parent <code>{short_id(r['parent_id'])}</code> {rows[r['parent_id']]['geomean_us']:.1f} µs): "
        f"{_e(r['hypothesis'])}</li>"
        for r in wins
    )
    listing = (
        f"<p>Experiments that beat their parent:</p><ul>{items}</ul>" if wins else "<p>No child beat its parent.</p>"
    )
    return (
        '<p class="note">Each node is a candidate (short id and geomean), placed by generation and ranked within it, '
        "fastest at the top; arrows run from parent to child. Colour is the time (failures are crosses); green "
        "arrows and notes mark children faster than their parent; the black ring is the best kernel.</p>" + listing
    )


def _shape_note() -> str:
    return (
        '<p class="note">Per-shape times of the reference are not stored, so each cell compares a candidate with the '
        "seeds: the fastest generation-0 kernel on that shape, divided by the candidate's time on it. Above 1 "
        "(green) the candidate is faster than every seed on that shape; below 1 (red) slower. Colours are clipped at "
        "0.5 and 2; the numbers are exact. Rows: passing candidates by generation, fastest first.</p>"
    )


def _failure_list(frame: pd.DataFrame) -> str:
    failed = frame[frame["status"] != "ok"]
    if failed.empty:
        return '<p class="note">Every candidate passed.</p>'
    items = []
    for status, group in failed.groupby("status"):
        messages = group["message"].map(short_message).value_counts()
        lines = "".join(f"<li>{count}× <code>{_e(m) or '(no message)'}</code></li>" for m, count in messages.items())
        items.append(f"<li><b>{_e(status)}</b>: {len(group)}<ul>{lines}</ul></li>")
    return f'<ul class="note">{"".join(items)}</ul>'


def _candidate_table(frame: pd.DataFrame) -> str:
    best = timed(frame)
    best_id = best.iloc[0]["candidate_id"] if not best.empty else None
    head = (
        "gen",
        "id",
        "parent",
        "template",
        "params",
        "status",
        "geomean µs",
        "× reference",
        "× vendor",
        "hypothesis",
        "message",
    )
    rows = []
    ordered = frame.sort_values(["generation", "geomean_us", "candidate_id"], na_position="last", kind="stable")
    for _, r in ordered.iterrows():
        colour = STATUS_COLOURS.get(r["status"], "#333")
        parent = short_id(r["parent_id"]) if isinstance(r["parent_id"], str) else ""
        rows.append(
            f'<tr id="c-{_e(r["candidate_id"])}-{r["generation"]}"'
            f"{' class=best' if r['candidate_id'] == best_id else ''}>"
            f'<td class="num">{r["generation"]}</td><td class="mono">{_e(r["candidate_id"])}</td>'
            f'<td class="mono">{parent}</td><td>{_e(family(r))}</td>'
            f'<td class="mono params">{_params_cell(r)}</td>'
            f'<td><span class="status" style="background:{colour}">{_e(r["status"])}</span></td>'
            f'<td class="num">{_num(r["geomean_us"])}</td><td class="num">{_num(r["speedup_vs_reference"])}</td>'
            f'<td class="num">{_num(r["speedup_vs_vendor"])}</td><td class="hyp">{_e(r["hypothesis"])}</td>'
            f'<td class="msg" title="{_e(r["message"])}">{_e(short_message(r["message"]))}</td></tr>'
        )
    header = "".join(f"<th>{h}</th>" for h in head)
    return f'<div class="wide"><table><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def _params_cell(row: pd.Series) -> str:
    """The point's parameters; for a composed candidate, its variants and which shapes each one serves."""
    plan = composition(row)
    if plan is None:
        return _e(short_params(row["params_json"]))
    variants = _variants(plan)
    served: dict[str, list[str]] = {v: [] for v in variants}
    for key, point in plan["shapes"].items():
        served[f"{point['template']} {short_params(json.dumps(point['params']))}"].append(key)
    items = "".join(
        f"<li>{_e(v)}{' (default)' if i == 0 else ''}: {_e(', '.join(served[v])) or 'no benchmark shape'}</li>"
        for i, v in enumerate(variants)
    )
    summary = f"{len(plan['shapes'])} shapes → {len(variants)} points"
    return f'<details class="composed"><summary>{summary}</summary><ul>{items}</ul></details>'


def source_diff(parent: str, child: str, parent_name: str, child_name: str) -> str:
    """A unified diff of two kernel sources as HTML (escaped; added and removed lines marked)."""
    lines = difflib.unified_diff(parent.splitlines(), child.splitlines(), parent_name, child_name, lineterm="", n=3)
    css = {"+": "add", "-": "del", "@": "hunk"}
    marked = []
    for line in lines:
        kind = "" if line.startswith(("+++", "---")) else css.get(line[:1], "")
        marked.append(f'<span class="{kind}">{html.escape(line)}</span>' if kind else html.escape(line))
    return '<pre class="diff">' + ("\n".join(marked) or "(the sources are identical)") + "</pre>"


def _diffs(frame: pd.DataFrame, read_source: Callable[[str], str]) -> str:
    rows, parts = by_id(frame), []
    for row in new_bests(frame):
        parent = rows.get(row["parent_id"]) if isinstance(row["parent_id"], str) else None
        title = f"<h3>Generation {row['generation']}: <code>{_e(row['candidate_id'])}</code> {row['geomean_us']:.2f} µs"
        if parent is None:
            parts.append(f"{title}</h3><p>No parent recorded, so nothing to diff.</p>")
            continue
        title += f" from <code>{_e(parent['candidate_id'])}</code> {_num(parent['geomean_us'])} µs</h3>"
        diff = source_diff(
            read_source(parent["source_path"]),
            read_source(row["source_path"]),
            parent["source_path"],
            row["source_path"],
        )
        parts.append(f"{title}<p>Hypothesis: {_e(row['hypothesis'])}</p>{diff}")
    if not parts:
        return '<p class="note">No candidate after the seeds beat the best seed.</p>'
    return '<p class="note">Each kernel that lowered the best so far, against the parent it was derived from.</p>' + (
        "".join(parts)
    )
