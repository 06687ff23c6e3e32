"""The terminal summary of a run (`ksci status`): one line per generation, then the best kernel and its ratios.

Reads only the run's facts (ksci.report.facts), so printing the status needs no plotting library. In a simulated
run every line that shows a time or a ratio says so: the table's times carry "(sim)", as `ksci runs` writes them,
and the lines under it start with "simulated".
"""

from __future__ import annotations

import pandas as pd

from ksci.report.facts import (
    STATUS_ORDER,
    describe,
    device,
    generation_summary,
    headline_facts,
    percent,
    simulated,
    times,
    two_decimals,
)
from ksci.report.wording import SIMULATED


def format_status(frame: pd.DataFrame, run: str) -> str:
    """The text `ksci status` prints for one run's lineage frame."""
    if frame.empty:
        return f"run {run}: no candidates recorded"
    summary, sim = generation_summary(frame), simulated(frame)
    statuses = [s for s in STATUS_ORDER[::-1] if s in summary.columns]
    width = 17 if sim else 14  # room for "1000.00 (sim)"
    lines = [
        f"run {run}: {frame['problem'].iloc[0]} on {device(frame)}, "
        f"{len(frame)} candidates in {len(summary)} generations, "
        f"{frame['created_at'].min():%Y-%m-%d %H:%M} to {frame['created_at'].max():%H:%M} UTC",
        f"{'gen':>4s} {'cands':>5s} "
        + " ".join(f"{s:>{max(len(s), 3)}s}" for s in statuses)
        + f" {'gen best us':>{width}s} {'best so far us':>{width}s}  best so far: candidate id",
    ]
    for _, g in summary.iterrows():
        counts = " ".join(f"{_count(g.get(s)):>{max(len(s), 3)}d}" for s in statuses)
        lines.append(
            f"{g['generation']:>4d} {g['candidates']:>5d} {counts} {_time(g['best_us'], sim):>{width}s} "
            f"{_time(g['best_so_far_us'], sim):>{width}s}  {g['best_so_far_id'] or '-'}"
        )
    facts = headline_facts(frame)
    if facts is None:
        return "\n".join([*lines, "no candidate passed"])
    return "\n".join([*lines, *_best_lines(facts, f"{SIMULATED} " if sim else "")])


def _best_lines(facts: dict, lead: str) -> list[str]:
    """The best kernel, its gains on the baselines and the seeds, and its hypothesis; `lead` starts each line that
    shows a number ("simulated " in a simulated run)."""
    best = facts["best"]
    gains = [
        f"{times(best[ratio])} than {name} ({two_decimals(best[column])} us)"
        for name, column, ratio in (
            ("the reference", "reference_geomean_us", "speedup_vs_reference"),
            ("the vendor library", "vendor_geomean_us", "speedup_vs_vendor"),
        )
        if pd.notna(best[ratio])
    ]
    if facts["sol_fraction"] is not None:
        gains.append(f"{percent(facts['sol_fraction'])} of the speed of light")
    lines = [
        f"best: {best['candidate_id']} (generation {best['generation']}, {describe(best) or 'no template'})",
        f"  {lead}geomean {best['geomean_us']:.2f} us" + (f": {', '.join(gains)}" if gains else ""),
    ]
    for name, seed in (("best seed", facts["best_seed"]), ("slowest seed", facts["slowest_seed"])):
        if seed is not None and seed["candidate_id"] != best["candidate_id"]:
            lines.append(
                f"  {times(seed['geomean_us'] / best['geomean_us'])} than the {name} "
                f"({seed['candidate_id']} {seed['template']}, {seed['geomean_us']:.2f} us{', ' + lead.strip() if lead else ''})"
            )
    hypothesis = f"hypothesis (its times {SIMULATED})" if lead else "hypothesis"
    lines.append(f"  {hypothesis}: {best['hypothesis']}")
    return lines


def _time(value, sim: bool) -> str:
    """A time in the table: two places, "(sim)" after it in a simulated run (as `ksci runs` marks one)."""
    text = two_decimals(value)
    return f"{text} (sim)" if sim and text != "-" else text


def _count(value) -> int:
    return 0 if value is None or pd.isna(value) else int(value)
