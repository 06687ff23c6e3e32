"""Parent selection: which evaluated kernels the next generation starts from.

Every strategy has the same small contract, `(population, count, rng) -> list[Selection]`: `population` is a run's
lineage frame (ksci.lineage.store), only rows with status "ok" and a geomean compete, at most `count` selections come back
with distinct bases, and ties are broken by candidate_id so that a fixed seed gives a fixed answer.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from ksci.evaluate.results import Status

CUSTOM_FAMILY = "custom"  # the family of kernels not rendered from a template
TOURNAMENT_SIZE = 3


@dataclass(frozen=True)
class Selection:
    base_id: str
    reference_id: str | None
    reason: str


Strategy = Callable[[pd.DataFrame, int, random.Random], list[Selection]]


def competitors(population: pd.DataFrame) -> pd.DataFrame:
    """Rows that compete: status ok with a geomean, one row per candidate (its best), fastest first."""
    needed = {"status", "geomean_us", "candidate_id", "template"}
    if population.empty or not needed <= set(population.columns):
        return pd.DataFrame(columns=["candidate_id", "geomean_us", "family"])
    ok = population[(population["status"] == str(Status.OK)) & population["geomean_us"].notna()]
    ok = ok.assign(family=ok["template"].astype(object).where(ok["template"].notna(), CUSTOM_FAMILY))
    ok = ok.sort_values(["geomean_us", "candidate_id"], kind="stable")
    return ok.drop_duplicates("candidate_id", keep="first").reset_index(drop=True)


def elitist(population: pd.DataFrame, count: int, rng: random.Random) -> list[Selection]:
    """The `count` fastest; each with the best of another template family as reference (else the next best)."""
    ranked = competitors(population)
    selections = []
    for rank, row in ranked.head(max(count, 0)).iterrows():
        reference, why = _contrast(ranked, row)
        reason = f"rank {rank + 1} of {len(ranked)} by geomean ({row['geomean_us']:.1f} us); reference: {why}"
        selections.append(Selection(row["candidate_id"], reference, reason))
    return selections


def tournament(population: pd.DataFrame, count: int, rng: random.Random) -> list[Selection]:
    """Size-3 tournaments drawn without replacement; winners leave the pool, the runner-up is the reference."""
    ranked = competitors(population)
    pool = list(range(len(ranked)))  # rank positions: a smaller position is a faster kernel
    selections = []
    while pool and len(selections) < count:
        entrants = sorted(rng.sample(pool, min(TOURNAMENT_SIZE, len(pool))))
        winner = ranked.iloc[entrants[0]]
        pool.remove(entrants[0])
        if len(entrants) > 1:
            runner_up = ranked.iloc[entrants[1]]
            reference, why = runner_up["candidate_id"], f"runner-up {runner_up['geomean_us']:.1f} us"
        else:
            reference, why = _contrast(ranked, winner)
        ids = ", ".join(ranked.iloc[i]["candidate_id"][:8] for i in entrants)
        reason = f"won a tournament of {len(entrants)} ({ids}) with {winner['geomean_us']:.1f} us; reference: {why}"
        selections.append(Selection(winner["candidate_id"], reference, reason))
    return selections


def diverse(population: pd.DataFrame, count: int, rng: random.Random) -> list[Selection]:
    """Round-robin over template families (fastest family first), each family's members by geomean."""
    ranked = competitors(population)
    families = list(dict.fromkeys(ranked["family"]))  # in order of each family's best geomean
    members = {f: ranked[ranked["family"] == f] for f in families}
    order = []
    for depth in range(max((len(m) for m in members.values()), default=0)):
        order.extend(members[f].iloc[depth] for f in families if depth < len(members[f]))
    selections = []
    for row in order[: max(count, 0)]:
        reference, why = _contrast(ranked, row)
        family_rank = list(members[row["family"]]["candidate_id"]).index(row["candidate_id"]) + 1
        reason = f"#{family_rank} of family {row['family']} ({row['geomean_us']:.1f} us); reference: {why}"
        selections.append(Selection(row["candidate_id"], reference, reason))
    return selections


STRATEGIES: dict[str, Strategy] = {"elitist": elitist, "tournament": tournament, "diverse": diverse}


def select_parents(name: str, population: pd.DataFrame, count: int, seed: int) -> list[Selection]:
    try:
        strategy = STRATEGIES[name]
    except KeyError:
        known = ", ".join(sorted(STRATEGIES))
        raise ValueError(f"unknown selection strategy {name!r} (known: {known})") from None
    return strategy(population, count, random.Random(seed))


def _contrast(ranked: pd.DataFrame, base: pd.Series) -> tuple[str | None, str]:
    """A reference for `base`: the fastest of another family, else the fastest other candidate."""
    others = ranked[ranked["candidate_id"] != base["candidate_id"]]
    if others.empty:
        return None, "none (only candidate)"
    elsewhere = others[others["family"] != base["family"]]
    if not elsewhere.empty:
        row = elsewhere.iloc[0]
        return row["candidate_id"], f"best of family {row['family']} ({row['geomean_us']:.1f} us)"
    row = others.iloc[0]
    return row["candidate_id"], f"next best of family {row['family']} ({row['geomean_us']:.1f} us)"
