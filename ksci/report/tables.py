"""The page's tables and lists as HTML: every candidate, the failures by class, and the source diff at each new
best. Every value from the lineage goes through `escaped`: hypotheses and messages come from an LLM and compilers.
In a simulated run the table's time and gain headings and each diff's heading say "simulated".
"""

from __future__ import annotations

import difflib
import html
import json
from collections.abc import Callable

import pandas as pd

from ksci.report.facts import (
    STATUS_COLOURS,
    by_id,
    composition,
    family,
    new_bests,
    short_id,
    short_message,
    short_params,
    timed,
    times,
    two_decimals,
    variant_labels,
)
from ksci.report.wording import marked


def escaped(value) -> str:
    """A lineage value as HTML text; a missing value (None, NaN) as nothing."""
    return "" if value is None or (not isinstance(value, str) and pd.isna(value)) else html.escape(str(value))


def failure_list(frame: pd.DataFrame) -> str:
    failed = frame[frame["status"] != "ok"]
    if failed.empty:
        return '<p class="note">Every candidate passed.</p>'
    items = []
    for status, group in failed.groupby("status"):
        messages = group["message"].map(short_message).value_counts()
        lines = "".join(
            f"<li>{_candidates(count)}: <code>{escaped(m) or '(no message)'}</code></li>"
            for m, count in messages.items()
        )
        items.append(f"<li><b>{escaped(status)}</b>: {_candidates(len(group))}<ul>{lines}</ul></li>")
    return f'<ul class="note">{"".join(items)}</ul>'


def _candidates(count: int) -> str:
    return f"{count} candidate{'' if count == 1 else 's'}"


def candidate_table(frame: pd.DataFrame, sim: bool = False) -> str:
    best = timed(frame)
    best_id = best.iloc[0]["candidate_id"] if not best.empty else None
    head = (
        "gen",
        "id",
        "parent",
        "template",
        "params",
        "status",
        marked("geomean µs", sim),
        marked("against the reference", sim),
        marked("against the vendor", sim),
        "hypothesis",
        "message",
    )
    rows = []
    ordered = frame.sort_values(["generation", "geomean_us", "candidate_id"], na_position="last", kind="stable")
    for _, r in ordered.iterrows():
        colour = STATUS_COLOURS.get(r["status"], "#333")
        parent = short_id(r["parent_id"]) if isinstance(r["parent_id"], str) else ""
        rows.append(
            f'<tr id="c-{escaped(r["candidate_id"])}-{r["generation"]}"'
            f"{' class=best' if r['candidate_id'] == best_id else ''}>"
            f'<td class="num">{r["generation"]}</td><td class="mono">{escaped(r["candidate_id"])}</td>'
            f'<td class="mono">{parent}</td><td>{escaped(family(r))}</td>'
            f'<td class="mono params">{_params_cell(r)}</td>'
            f'<td><span class="status" style="background:{colour}">{escaped(r["status"])}</span></td>'
            f'<td class="num">{two_decimals(r["geomean_us"])}</td><td class="num">{_gain(r["speedup_vs_reference"])}</td>'
            f'<td class="num">{_gain(r["speedup_vs_vendor"])}</td><td class="hyp">{escaped(r["hypothesis"])}</td>'
            f'<td class="msg" title="{escaped(r["message"])}">{escaped(short_message(r["message"]))}</td></tr>'
        )
    header = "".join(f"<th>{h}</th>" for h in head)
    return f'<div class="wide"><table><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def _gain(ratio) -> str:
    return "-" if ratio is None or pd.isna(ratio) else times(ratio)


def _params_cell(row: pd.Series) -> str:
    """The point's parameters; for a composed candidate, its variants and which shapes each one serves."""
    plan = composition(row)
    if plan is None:
        return escaped(short_params(row["params_json"]))
    variants = variant_labels(plan)
    served: dict[str, list[str]] = {v: [] for v in variants}
    for key, point in plan["shapes"].items():
        served[f"{point['template']} {short_params(json.dumps(point['params']))}"].append(key)
    items = "".join(
        f"<li>{escaped(v)}{' (default)' if i == 0 else ''}: {escaped(', '.join(served[v])) or 'no benchmark shape'}</li>"
        for i, v in enumerate(variants)
    )
    summary = f"{len(plan['shapes'])} shapes → {len(variants)} points"
    return f'<details class="composed"><summary>{summary}</summary><ul>{items}</ul></details>'


def source_diff(parent: str, child: str, parent_name: str, child_name: str) -> str:
    """A unified diff of two kernel sources as HTML (escaped; added and removed lines marked)."""
    lines = difflib.unified_diff(parent.splitlines(), child.splitlines(), parent_name, child_name, lineterm="", n=3)
    css = {"+": "add", "-": "del", "@": "hunk"}
    shown = []
    for line in lines:
        kind = "" if line.startswith(("+++", "---")) else css.get(line[:1], "")
        shown.append(f'<span class="{kind}">{html.escape(line)}</span>' if kind else html.escape(line))
    return '<pre class="diff">' + ("\n".join(shown) or "(the sources are identical)") + "</pre>"


def diffs(frame: pd.DataFrame, read_source: Callable[[str], str], sim: bool = False) -> str:
    rows, parts = by_id(frame), []
    for row in new_bests(frame):
        parent = rows.get(row["parent_id"]) if isinstance(row["parent_id"], str) else None
        title = f"<h3>Generation {row['generation']}: <code>{escaped(row['candidate_id'])}</code> {row['geomean_us']:.2f} µs"
        mark = marked("", sim)
        if parent is None:
            parts.append(f"{title}{mark}</h3><p>No parent recorded, so nothing to diff.</p>")
            continue
        title += (
            f" from <code>{escaped(parent['candidate_id'])}</code> {two_decimals(parent['geomean_us'])} µs{mark}</h3>"
        )
        diff = source_diff(
            read_source(parent["source_path"]),
            read_source(row["source_path"]),
            parent["source_path"],
            row["source_path"],
        )
        parts.append(
            f"{title}<p>{'Hypothesis (its times simulated)' if sim else 'Hypothesis'}: "
            f"{escaped(row['hypothesis'])}</p>{diff}"
        )
    if not parts:
        return '<p class="note">No candidate after the seeds beat the best seed.</p>'
    return '<p class="note">Each kernel that lowered the best so far, against the parent it was derived from.</p>' + (
        "".join(parts)
    )
