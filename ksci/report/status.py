"""The terminal summary of a run (`ksci status`): one line per generation, then the best kernel and its ratios.

Reads only the run's facts (ksci.report.facts), so printing the status needs no plotting library.
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
    times,
    two_decimals,
)


def format_status(frame: pd.DataFrame, run: str) -> str:
    """The text `ksci status` prints for one run's lineage frame."""
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
            f"{g['generation']:>4d} {g['candidates']:>5d} {counts} {two_decimals(g['best_us']):>11s} "
            f"{two_decimals(g['best_so_far_us']):>14s}  {g['best_so_far_id'] or '-'}"
        )
    facts = headline_facts(frame)
    if facts is None:
        return "\n".join([*lines, "no candidate passed"])
    best = facts["best"]
    lines += [
        f"best: {best['candidate_id']} (generation {best['generation']}, {describe(best) or 'no template'})",
        f"  geomean {best['geomean_us']:.2f} us: {times(best['speedup_vs_reference'])} than the reference "
        f"({two_decimals(best['reference_geomean_us'])} us), {times(best['speedup_vs_vendor'])} than the vendor library "
        f"({two_decimals(best['vendor_geomean_us'])} us), {percent(facts['sol_fraction'])} of the speed of light",
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
