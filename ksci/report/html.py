"""The evolution report: one self-contained HTML page built from a run's lineage.

`build_report(frame, read_source)` gives the page for the frame that `LineageStore.read(run)` returns, with the
plots inline as base64 PNG (no network). The parts live beside it: the run's facts (facts.py), the plots
(plots.py, lineage_graph.py), the tables and diffs (tables.py); `ksci status` prints status.py's summary.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable

import pandas as pd

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
    times,
    two_decimals,
)
from ksci.report.lineage_graph import plot_lineage
from ksci.report.plots import plot_failures, plot_progress, plot_shape_heatmap
from ksci.report.tables import candidate_table, diffs, escaped, failure_list

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
        ("failures", "Failures by class", _img(plot_failures(frame)), failure_list(frame)),
        ("candidates", "Every candidate", candidate_table(frame), ""),
        ("diffs", "What changed at each new best", diffs(frame, read_source), ""),
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


def _card(value: str, label: str) -> str:
    return f'<div class="card"><b>{value}</b><span>{label}</span></div>'


def _headline(frame: pd.DataFrame) -> str:
    """The box at the top: the best kernel, its ratios as cards, the story of the run and the chain that led there."""
    facts = headline_facts(frame)
    if facts is None:
        return '<div class="headline"><p class="best">No candidate passed verification.</p></div>'
    best = facts["best"]
    return (
        f'<div class="headline"><p class="best">Best kernel: <code>{escaped(best["candidate_id"])}</code> '
        f"({escaped(describe(best))}), generation {best['generation']}.</p>"
        f"<p>{_run_story(frame, facts)}</p>"
        f'<div class="cards">{"".join(_cards(facts))}</div>'
        f'<p><b>How it got there</b> (each step a parent and the experiment on it):</p><ol class="chain">'
        f"{''.join(_chain_steps(facts['chain']))}</ol>{_noise_caution(frame)}</div>"
    )


def _cards(facts: dict) -> list[str]:
    """The best kernel's time and its ratios to the reference, the vendor, the speed of light and the seeds."""
    best = facts["best"]
    cards = [
        _card(f"{best['geomean_us']:.1f} µs", "geomean over the benchmark shapes"),
        _card(
            f"{two_decimals(best['speedup_vs_reference'])}×",
            f"the reference ({two_decimals(best['reference_geomean_us'])} µs)",
        ),
        _card(
            f"{two_decimals(best['speedup_vs_vendor'])}×",
            f"the vendor library ({two_decimals(best['vendor_geomean_us'])} µs): {times(best['speedup_vs_vendor'])}",
        ),
        _card(
            percent(facts["sol_fraction"]),
            f"of the speed of light ({two_decimals(best['speed_of_light_geomean_us'])} µs)",
        ),
    ]
    for name, other in (("best seed", facts["best_seed"]), ("slowest seed", facts["slowest_seed"])):
        if other is not None:
            label = (
                f"the {name}, {escaped(other['template'])} {short_id(other['candidate_id'])} "
                f"({other['geomean_us']:.1f} µs)"
            )
            cards.append(_card(f"{other['geomean_us'] / best['geomean_us']:.2f}×", label))
    return cards


def _run_story(frame: pd.DataFrame, facts: dict) -> str:
    """How far the best moved from the best seed, and how the best compares with the baselines, in two sentences."""
    best, seed = facts["best"], facts["best_seed"]
    if seed is None or seed["candidate_id"] == best["candidate_id"]:
        moved = "no kernel after the seeds beat the best seed"
    else:
        moved = (
            f"the best geomean went from {seed['geomean_us']:.1f} µs (the best seed) to {best['geomean_us']:.1f} µs, "
            f"{100 * (seed['geomean_us'] / best['geomean_us'] - 1):.1f}% faster; the last step was "
            f"<i>{escaped(short_hypothesis(best['hypothesis']))}</i>"
        )
    return (
        f"In {frame['generation'].nunique()} generations of {len(frame)} candidates, {moved}. The best kernel is "
        f"{times(best['speedup_vs_reference'])} than the reference and {times(best['speedup_vs_vendor'])} than the "
        "vendor library."
    )


def _chain_steps(chain: list[pd.Series]) -> list[str]:
    """One list item per ancestor of the best, seed first, with its change on its parent."""
    steps, parent_us = [], None
    for r in chain:
        change = f" ({100 * (r['geomean_us'] / parent_us - 1):+.1f}% on its parent)" if parent_us else ""
        steps.append(
            f"<li><code>{short_id(r['candidate_id'])}</code> {two_decimals(r['geomean_us'])} µs{change}, generation "
            f"{r['generation']}: {escaped(r['hypothesis'])}</li>"
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


def _lineage_note(frame: pd.DataFrame) -> str:
    wins, rows = faster_than_parent(frame), by_id(frame)
    items = "".join(
        f"<li><code>{short_id(r['candidate_id'])}</code> {r['geomean_us']:.1f} µs (generation {r['generation']}, "
        f"parent <code>{short_id(r['parent_id'])}</code> {rows[r['parent_id']]['geomean_us']:.1f} µs): "
        f"{escaped(r['hypothesis'])}</li>"
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
