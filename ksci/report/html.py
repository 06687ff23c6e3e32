"""The evolution report: one self-contained HTML page built from a run's lineage.

`build_report(frame, read_source)` gives the page for the frame that `LineageStore.read(run)` returns, with the
plots inline as SVG (no network). The parts live beside it: the run's facts (facts.py), the plots
(plots.py, lineage_graph.py), the tables and diffs (tables.py), what the profiler saw (profiles.py); `ksci status`
prints status.py's summary.
A simulated run's page says so in a banner, on every tile, in every sentence and table heading that shows one of
its numbers and in every plot; it claims nothing a simulator did not do (no noise of a re-timed reference).
Gains read one way throughout (ksci.report.wording.gain): "1.05x faster", "1.70x slower".
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence

import pandas as pd

from ksci.profile.store import ProfileRecord
from ksci.report.facts import (
    by_id,
    describe,
    device,
    faster_than_parent,
    headline_facts,
    noise,
    percent,
    short_hypothesis,
    short_id,
    simulated,
    times,
    two_decimals,
)
from ksci.report.lineage_graph import plot_lineage
from ksci.report.plots import plot_failures, plot_progress, plot_shape_heatmap
from ksci.report.profiles import profile_note, profile_section
from ksci.report.tables import candidate_table, diffs, escaped, failure_list
from ksci.report.wording import SIMULATED, SIMULATED_NOTE, marked

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;margin:0;background:#f6f6f4}
main{max-width:1320px;margin:0 auto;padding:18px 28px 60px;background:#fff}
h1{font-size:24px;margin:6px 0 2px}h2{font-size:19px;margin:34px 0 6px;border-bottom:1px solid #ddd}
.meta,.note{color:#666}.note{font-size:13px;max-width:1000px}
.headline{background:#f1f8f1;border:1px solid #c8e6c9;border-radius:6px;padding:12px 18px;margin:14px 0}
.headline .best{font-size:18px}.simulated{background:#fff4e5;border:2px solid #b45309;color:#7c2d12;
border-radius:6px;padding:8px 14px;font-weight:600}.card em{color:#b45309;font-size:12px;font-style:normal;display:block}
svg.plot{max-width:100%;height:auto;display:block}.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
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
pre.digest{background:#f6f8fa;border:1px solid #ddd;padding:6px 8px;font-size:12px;line-height:1.35;overflow-x:auto}
ul.profiles{padding-left:20px}ul.profiles li{margin:2px 0}
"""


def build_report(frame: pd.DataFrame, read_source: Callable[[str], str], profiles: Sequence[ProfileRecord] = ()) -> str:
    """The whole page for one run's lineage; `read_source` maps a row's source_path to the kernel source;
    `profiles`: what the run's profiler saw (ksci.profile.store.read_profiles), none for a run without any."""
    if frame.empty:
        return _page("empty run", "<p>No candidates recorded.</p>")
    first, sim = frame.iloc[0], simulated(frame)
    title = marked(f"{first['problem']}: run {first['run']}", sim)
    sections = [
        ("progress", "Best so far, generation by generation", plot_progress(frame, sim), _progress_note(frame)),
        ("lineage", "Lineage: who came from whom", plot_lineage(frame, sim), _lineage_note(frame, sim)),
        ("shapes", "Per benchmark shape", plot_shape_heatmap(frame, sim), _shape_note()),
        ("failures", "Failures by class", plot_failures(frame, sim), failure_list(frame)),
        ("candidates", "Every candidate", candidate_table(frame, sim), ""),
        ("diffs", "What changed at each new best", diffs(frame, read_source, sim), ""),
        ("profiles", "What the profiler saw", profile_section(frame, profiles), profile_note()),
    ]
    nav = "<nav>" + "".join(f'<a href="#{key}">{html.escape(name)}</a>' for key, name, _, _ in sections) + "</nav>"
    banner = f'<p class="simulated">{html.escape(SIMULATED_NOTE[0].upper() + SIMULATED_NOTE[1:])}.</p>' if sim else ""
    body = [f"<h1>{html.escape(title)}</h1>", _meta(frame), banner, _headline(frame, sim), nav]
    for key, name, content, note in sections:
        body.append(f'<h2 id="{key}">{html.escape(name)}</h2>{note}{content}')
    return _page(title, "\n".join(body))


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{CSS}</style></head><body><main>\n{body}\n</main></body></html>\n"
    )


def _meta(frame: pd.DataFrame) -> str:
    measured = frame[frame["gpu"].notna()]
    fingerprint = json.loads((measured if not measured.empty else frame)["fingerprint_json"].iloc[0] or "{}")
    parts = [
        escaped(device(frame)),
        f"{len(frame)} candidates in {frame['generation'].nunique()} generations",
        "proposers: " + ", ".join(escaped(p) for p in frame["proposer"].unique()),
        f"{frame['created_at'].min():%Y-%m-%d %H:%M} to {frame['created_at'].max():%H:%M} UTC",
    ]
    if fingerprint.get("toolchain"):
        parts.append(escaped(fingerprint["toolchain"]))
    return f'<p class="meta">{" · ".join(parts)}</p>'


def _card(value: str, label: str, sim: bool) -> str:
    mark = f"<em>{SIMULATED}</em>" if sim else ""
    return f'<div class="card">{mark}<b>{value}</b><span>{label}</span></div>'


def _headline(frame: pd.DataFrame, sim: bool) -> str:
    """The box at the top: the best kernel, its ratios as cards, the story of the run and the chain that led there."""
    facts = headline_facts(frame)
    if facts is None:
        return '<div class="headline"><p class="best">No candidate passed verification.</p></div>'
    best = facts["best"]
    return (
        f'<div class="headline"><p class="best">Best kernel: <code>{escaped(best["candidate_id"])}</code> '
        f"({escaped(describe(best))}), generation {best['generation']}.</p>"
        f"<p>{_run_story(frame, facts, sim)}</p>"
        f'<div class="cards">{"".join(_cards(facts, sim))}</div>'
        f'<p><b>How it got there</b> (each step a parent and the experiment on it):</p><ol class="chain">'
        f"{''.join(_chain_steps(facts['chain'], sim))}</ol>{'' if sim else _noise_caution(frame)}</div>"
    )


def _cards(facts: dict, sim: bool) -> list[str]:
    """The best kernel's time and its gains on the reference, the vendor, the seeds, and its share of the speed
    of light; a baseline that the run has no time for gets no card."""
    best = facts["best"]
    cards = [_card(f"{best['geomean_us']:.1f} µs", "geomean over the benchmark shapes", sim)]
    for name, column, ratio in (
        ("the reference", "reference_geomean_us", "speedup_vs_reference"),
        ("the vendor library", "vendor_geomean_us", "speedup_vs_vendor"),
    ):
        if pd.notna(best[ratio]):
            cards.append(_card(times(best[ratio]), f"than {name} ({two_decimals(best[column])} µs)", sim))
    if facts["sol_fraction"] is not None:
        sol = best["speed_of_light_geomean_us"]
        cards.append(_card(percent(facts["sol_fraction"]), f"of the speed of light ({two_decimals(sol)} µs)", sim))
    for name, other in (("best seed", facts["best_seed"]), ("slowest seed", facts["slowest_seed"])):
        if other is not None and other["candidate_id"] != best["candidate_id"]:
            label = (
                f"than the {name}, {escaped(other['template'])} {short_id(other['candidate_id'])} "
                f"({other['geomean_us']:.1f} µs)"
            )
            cards.append(_card(times(other["geomean_us"] / best["geomean_us"]), label, sim))
    return cards


def _run_story(frame: pd.DataFrame, facts: dict, sim: bool) -> str:
    """How far the best moved from the best seed, and how the best compares with the baselines, in two sentences."""
    best, seed = facts["best"], facts["best_seed"]
    if seed is None or seed["candidate_id"] == best["candidate_id"]:
        moved = "no kernel after the seeds beat the best seed"
    else:
        moved = (
            f"the best geomean went from {seed['geomean_us']:.1f} µs (the best seed) to {best['geomean_us']:.1f} µs, "
            f"{times(seed['geomean_us'] / best['geomean_us'])}; the last step was "
            f"<i>{escaped(short_hypothesis(best['hypothesis']))}</i>"
        )
    baselines = [
        f"{times(best[ratio])} than {name}"
        for name, ratio in (("the reference", "speedup_vs_reference"), ("the vendor library", "speedup_vs_vendor"))
        if pd.notna(best[ratio])
    ]
    compared = f" The best kernel is {' and '.join(baselines)}." if baselines else ""
    timings = f" ({SIMULATED} timings)" if sim else ""
    return f"In {frame['generation'].nunique()} generations of {len(frame)} candidates{timings}, {moved}.{compared}"


def _chain_steps(chain: list[pd.Series], sim: bool) -> list[str]:
    """One list item per ancestor of the best, seed first, with its gain on its parent."""
    steps, parent_us = [], None
    for r in chain:
        change = f", {times(parent_us / r['geomean_us'])} than its parent" if parent_us else ""
        steps.append(
            f"<li><code>{short_id(r['candidate_id'])}</code> {_us(r['geomean_us'], sim, 2)}"
            f"{change}, generation {r['generation']}: {escaped(r['hypothesis'])}</li>"
        )
        parent_us = r["geomean_us"]
    return steps


def _noise_caution(frame: pd.DataFrame) -> str:
    """How much the re-timed reference varied over the run: differences below that are noise."""
    spread = noise(frame)
    if spread is None:
        return ""
    return (
        f'<p class="note">The reference was re-timed beside every candidate; its geomean varied by '
        f"{100 * spread:.1f}% over the run, so differences of that size are noise.</p>"
    )


def _progress_note(frame: pd.DataFrame) -> str:
    return (
        '<p class="note">Every candidate is a dot at its generation (passes as circles, failures as crosses at the '
        "top: they have no time); the green step is the best so far. Dashed lines: the PyTorch reference, the vendor "
        "library and the roofline's speed of light, as geomeans over the same shapes. Lower is faster.</p>"
    )


def _us(value: float, sim: bool, places: int = 1) -> str:
    """A time in µs, marked as simulated in a simulated run."""
    return marked(f"{value:.{places}f} µs", sim)


def _lineage_note(frame: pd.DataFrame, sim: bool) -> str:
    wins, rows = faster_than_parent(frame), by_id(frame)
    items = "".join(
        f"<li><code>{short_id(r['candidate_id'])}</code> {_us(r['geomean_us'], sim)}, "
        f"{times(rows[r['parent_id']]['geomean_us'] / r['geomean_us'])} than its parent "
        f"<code>{short_id(r['parent_id'])}</code> ({rows[r['parent_id']]['geomean_us']:.1f} µs), generation "
        f"{r['generation']}: {escaped(r['hypothesis'])}</li>"
        for r in wins
    )
    listing = f"<p>Experiments that beat their parent:</p><ul>{items}</ul>"
    if len(wins) > 8:  # folded, so that a long run's list does not push the graph pages down
        listing = f"<details><summary>{len(wins)} experiments beat their parent</summary><ul>{items}</ul></details>"
    if not wins:
        listing = "<p>No child beat its parent.</p>"
    return (
        '<p class="note">Each node is a candidate (short id, geomean and the short form of its hypothesis), one row '
        "per generation from the seeds at the top, ranked within it, fastest at the left; arrows run from parent to "
        "child. Colour is the time (failures are crosses); green arrows and notes mark children faster than their "
        "parent; the black ring is the best kernel.</p>" + listing
    )


def _shape_note() -> str:
    return (
        '<p class="note">Per-shape times of the reference are not stored, so each cell compares a candidate with the '
        "seeds: the fastest generation-0 kernel on that shape, divided by the candidate's time on it. Above 1 "
        "(green) the candidate is faster than every seed on that shape; below 1 (red) slower. Colours stop changing "
        "at half and at twice the seeds' speed; the numbers are exact. Rows: passing candidates by generation, fastest first.</p>"
    )
