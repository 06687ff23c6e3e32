"""What the designer and the writer are told about the Base's hardware, in three fixed blocks: the per-shape
standing, the compiler's resource report (Base and Reference side by side) and the profile digest (or why there is
none). The scientist (ksci.proposers.scientist) puts it on the Base it hands to both stages' templates."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ksci import PROJECT_ROOT
from ksci.problem.spec import Problem
from ksci.profile.standing import resources_text, shape_standing, standing_text

GUIDES = PROJECT_ROOT / "knowledge" / "profile"  # how to read the digest, per target (knowledge/profile/<target>.md)
NO_PROFILE_STEP = "no profile: this run has no profile step (ksci evolve --no-profile, or a proposer without one)"


@dataclass(frozen=True)
class HardwareView:
    standing: str
    resources: str
    profile: str
    guide: str = ""  # how to read the digest on this target


def best_row(population: pd.DataFrame, candidate_id: str) -> dict | None:
    """The candidate's fastest row (it may have been timed in several generations), as a plain dict."""
    rows = population[population["candidate_id"] == candidate_id]
    if rows.empty:
        return None
    return rows.sort_values("geomean_us", na_position="last").iloc[0].to_dict()


def hardware_view(
    problem: Problem,
    population: pd.DataFrame,
    base_id: str,
    reference_id: str | None,
    profile: str,
    target: str = "cuda",
) -> HardwareView:
    base = best_row(population, base_id) or {"candidate_id": base_id}
    reference = best_row(population, reference_id) if reference_id else None
    gpu = base.get("gpu") if isinstance(base.get("gpu"), str) else None
    standing = standing_text(shape_standing(problem, base, reference), gpu)
    guide_file = GUIDES / f"{target}.md"
    guide = guide_file.read_text().strip() if guide_file.is_file() else ""
    return HardwareView(standing, resources_text(base, reference), profile, guide)
