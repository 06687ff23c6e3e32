"""The report's "What the profiler saw": the digest the LLM was told for each generation's Base, and the run's best
kernel's, as the run recorded them under <run>/profiles/ (ksci.profile.store.read_profiles).

Where there is no profile the section says so and why ("no profile: ..."), as the prompts did; a generation with no
record at all had no profile step (the tuning proposer, or `ksci evolve --no-profile`). Every text is escaped: a
digest holds a kernel's name, which the candidate's source chose.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd

from ksci.profile.store import ProfileRecord
from ksci.report.facts import short_id

NOT_RECORDED = "no profile: none was recorded for this generation (a proposer without a profile step, or --no-profile)"
BEST_NOT_RECORDED = (
    "no profile: the run's best kernel was not profiled (ksci evolve --no-profile, a run from before profiling, or "
    "a run still going)"
)


def profile_section(frame: pd.DataFrame, profiles: Sequence[ProfileRecord]) -> str:
    """The section's HTML: the best kernel's digest in full, then one folded line per generation's Base."""
    best = [r for r in profiles if r.role == "best"]
    parts = [_best(best[-1] if best else None)]
    by_generation: dict[int, list[ProfileRecord]] = {}
    for record in profiles:
        if record.role == "base":
            by_generation.setdefault(record.generation, []).append(record)
    items = []
    for generation in sorted(set(int(g) for g in frame["generation"].unique()) | set(by_generation)):
        records = by_generation.get(generation)
        if not records:
            items.append(f"<li>generation {generation}: {html.escape(NOT_RECORDED)}</li>")
        for record in records or []:
            items.append(f"<li>{_folded(record)}</li>")
    parts.append(f'<p>Each generation\'s Base, as the designer and the writer were told:</p><ul class="profiles">'
                 f"{''.join(items)}</ul>")  # fmt: skip
    return "".join(parts)


def profile_note() -> str:
    return (
        '<p class="note">What Nsight Compute (CUDA) or rocprofv3 (ROCm) measured on one shape of a kernel, as the '
        "fixed digest the LLM reads (never the raw report): roofline class, tensor/MFMA pipe busy, memory throughput, "
        "occupancy and its limit, the top stall reasons. The run's best kernel is profiled once at the end; each "
        "generation's Base when the LLM scientist chose it. Seconds are the profiler's wall time.</p>"
    )


def _best(record: ProfileRecord | None) -> str:
    if record is None:
        return f"<p><b>The run's best kernel</b>: {html.escape(BEST_NOT_RECORDED)}</p>"
    return (
        f"<p><b>The run's best kernel</b>, <code>{html.escape(record.candidate_id)}</code> "
        f"(profiled after generation {record.generation}{_seconds(record)}):</p>"
        f'<pre class="digest">{html.escape(record.digest)}</pre>'
    )


def _folded(record: ProfileRecord) -> str:
    """One line (the roofline class, or why there is no profile), the whole digest when unfolded."""
    head = f"generation {record.generation}, Base <code>{html.escape(short_id(record.candidate_id))}</code>"
    if not record.ok:
        return f"{head}: {html.escape(record.digest)}{_seconds(record)}"
    lines = record.digest.splitlines()
    summary = next((line for line in lines if line.startswith("roofline class:")), lines[0] if lines else "")
    return (
        f"<details><summary>{head}: {html.escape(summary)}{_seconds(record)}</summary>"
        f'<pre class="digest">{html.escape(record.digest)}</pre></details>'
    )


def _seconds(record: ProfileRecord) -> str:
    return f", {record.seconds:.1f} s" if record.seconds else ""
