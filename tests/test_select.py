"""Selection strategies on a small synthetic population."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from ksci.lineage.store import Candidate, LineageStore, empty_frame
from ksci.proposers.select import STRATEGIES, Selection, competitors, diverse, elitist, select_parents, tournament


def make_candidate(n: int, generation: int = 0, **values) -> Candidate:
    defaults = dict(
        run="r1", problem="fp8_gemm", proposer="tuning", source_path="s", target="cuda", status="ok", params_json="{}"
    )
    return Candidate(generation=generation, candidate_id=f"{n:016x}", **{**defaults, **values})


def population(tmp_path) -> pd.DataFrame:
    """Ten kernels in three families (mma, naive, custom) plus failures that must never be chosen."""
    store = LineageStore(tmp_path)
    rows = [
        make_candidate(n=1, template="mma", geomean_us=10.0),
        make_candidate(n=2, template="mma", geomean_us=12.0),
        make_candidate(n=3, template="mma", geomean_us=12.0),  # ties with n=2: candidate_id decides
        make_candidate(n=4, template="naive", geomean_us=30.0),
        make_candidate(n=5, template="naive", geomean_us=35.0),
        make_candidate(n=6, template=None, params_json=None, geomean_us=20.0),  # family "custom"
        make_candidate(n=7, template="mma", geomean_us=50.0),
        make_candidate(n=8, template="mma", geomean_us=1.0, status="wrong"),
        make_candidate(n=9, template="mma", geomean_us=None, status="compile_error"),
        make_candidate(n=10, template="mma", geomean_us=0.5, status="suspicious"),
    ]
    # The same kernel again in a later generation, slower: it competes once, with its best time.
    rows.append(make_candidate(generation=1, n=1, template="mma", geomean_us=11.0))
    store.append(rows)
    return store.read("r1")


def cid(n: int) -> str:
    return f"{n:016x}"


def test_competitors_are_ok_timed_and_unique(tmp_path) -> None:
    ranked = competitors(population(tmp_path))
    assert list(ranked["candidate_id"]) == [cid(n) for n in (1, 2, 3, 6, 4, 5, 7)]
    assert list(ranked["family"]) == ["mma", "mma", "mma", "custom", "naive", "naive", "mma"]
    assert ranked.loc[0, "geomean_us"] == 10.0


def test_elitist(tmp_path) -> None:
    picks = elitist(population(tmp_path), 3, random.Random(0))
    assert [p.base_id for p in picks] == [cid(1), cid(2), cid(3)]
    # The reference is the best of another family: custom n=6 for every mma base.
    assert [p.reference_id for p in picks] == [cid(6)] * 3
    assert "rank 1 of 7" in picks[0].reason


def test_elitist_single_family_uses_second_best(tmp_path) -> None:
    frame = population(tmp_path)
    mma = frame[frame["template"] == "mma"]
    picks = elitist(mma, 2, random.Random(0))
    assert [(p.base_id, p.reference_id) for p in picks] == [(cid(1), cid(2)), (cid(2), cid(1))]


def test_tournament(tmp_path) -> None:
    frame = population(tmp_path)
    picks = tournament(frame, 4, random.Random(7))
    ok_ids = set(competitors(frame)["candidate_id"])
    assert len(picks) == 4 and len({p.base_id for p in picks}) == 4  # winners leave the pool
    assert all(p.base_id in ok_ids and p.reference_id in ok_ids for p in picks)
    assert picks == tournament(frame, 4, random.Random(7))  # same rng seed, same answer
    # The first winner beat its two rivals: the reference (the runner-up) is slower.
    times = competitors(frame).set_index("candidate_id")["geomean_us"]
    assert all(times[p.base_id] <= times[p.reference_id] for p in picks)
    # Asking for more than there are returns each competitor once.
    assert sorted(p.base_id for p in tournament(frame, 50, random.Random(1))) == sorted(ok_ids)


def test_tournament_favours_the_fast(tmp_path) -> None:
    frame = population(tmp_path)
    wins = [tournament(frame, 1, random.Random(seed))[0].base_id for seed in range(60)]
    assert wins.count(cid(1)) > wins.count(cid(7))
    assert cid(7) not in wins  # the slowest can never win a tournament of 3 while 7 compete


def test_diverse(tmp_path) -> None:
    picks = diverse(population(tmp_path), 5, random.Random(0))
    # Families in order of their best: mma (10), custom (20), naive (30); then the second of each that has one.
    assert [p.base_id for p in picks] == [cid(1), cid(6), cid(4), cid(2), cid(5)]
    assert picks[0].reference_id == cid(6) and picks[1].reference_id == cid(1)
    assert "family custom" in picks[1].reason


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_empty_and_failed_populations_select_nothing(name: str, tmp_path) -> None:
    assert select_parents(name, empty_frame(), 3, seed=0) == []
    assert select_parents(name, pd.DataFrame(), 3, seed=0) == []
    frame = population(tmp_path)
    assert select_parents(name, frame[frame["status"] != "ok"], 3, seed=0) == []
    assert select_parents(name, frame, 0, seed=0) == []


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_select_parents_is_deterministic(name: str, tmp_path) -> None:
    frame = population(tmp_path)
    first = select_parents(name, frame, 3, seed=11)
    assert first == select_parents(name, frame.sample(frac=1.0, random_state=3), 3, seed=11)  # row order is moot
    assert all(isinstance(s, Selection) and s.base_id != s.reference_id for s in first)


def test_unknown_strategy() -> None:
    with pytest.raises(ValueError, match="unknown selection strategy 'best'.*diverse, elitist, tournament"):
        select_parents("best", empty_frame(), 1, seed=0)
