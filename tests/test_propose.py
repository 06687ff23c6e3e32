"""The tuning proposer on a toy problem, with a recorded timing table standing in for the GPU."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import ksci.proposers.optuna_search
import ksci.proposers.per_shape
from ksci.lineage.store import Candidate, LineageStore, empty_frame
from ksci.problem.constraints import parse_constraint
from ksci.problem.spec import Problem, TemplateSpec, load_problem
from ksci.proposers.optuna_search import _parent_turn, _study, propose_tuning
from ksci.proposers.select import Selection, select_parents
from ksci.proposers.space import (
    Move,
    Proposal,
    Step,
    _feasible_points,
    _repair,
    _repair_by_steps,
    neighbours,
    space_note,
)

MMA = TemplateSpec(
    name="mma",
    dialect="cuda",
    path=Path("mma.cu.j2"),
    params={"BM": [32, 64, 128, 256], "BN": [32, 64, 128, 256], "BK": [16, 32, 64], "STAGES": [1, 2, 3, 4]},
    default={"BM": 64, "BN": 64, "BK": 32, "STAGES": 2},
)
NAIVE = TemplateSpec("naive", "cuda", Path("naive.cu.j2"), {"BLOCK": [64, 128, 256]}, {"BLOCK": 128})
MFMA = TemplateSpec("mfma", "hip", Path("mfma.hip.j2"), {"BM": [64, 128]}, {"BM": 64})
TINY = TemplateSpec("tiny", "cuda", Path("tiny.cu.j2"), {"X": [1, 2]}, {"X": 1})
FIXED = TemplateSpec("fixed", "cuda", Path("fixed.cu.j2"), {}, {})  # a template without parameters

# The fastest mma point of the simulated GPU, and one that cannot compile (too much shared memory).
BEST_MMA = {"BM": 128, "BN": 256, "BK": 64, "STAGES": 3}


def make_problem(*templates: TemplateSpec) -> Problem:
    return Problem(
        name="toy",
        root=Path("."),
        description="a toy problem for the proposer",
        entry_name="toy",
        entry_signature='extern "C" int toy(void* stream)',
        entry_args=("stream",),
        outputs=(),
        dtypes={},
        tests=(),
        benchmarks=(),
        rtol=0.0,
        atol=0.0,
        trials=1,
        roofline_compute="fp32",
        templates=templates,
    )


def simulated_time(template: str, params: dict) -> float | None:
    """A recorded timing table: microseconds, or None where the kernel fails to compile."""
    if template == "naive":
        return 900.0 + 50 * abs(NAIVE.params["BLOCK"].index(params["BLOCK"]) - 1)
    if template in ("tiny", "fixed"):
        return 500.0
    if params["BK"] == 64 and params["STAGES"] == 4:
        return None
    time = 100.0
    for name, values in MMA.params.items():
        time *= 1 + 0.3 * abs(values.index(params[name]) - values.index(BEST_MMA[name]))
    return time


def evaluated(template: str, params: dict, generation: int = 0, target: str = "cuda", **values) -> Candidate:
    key = json.dumps(params, sort_keys=True)
    time = simulated_time(template, params) if target == "cuda" else 1.0
    fields = dict(
        run="sim",
        problem="toy",
        generation=generation,
        candidate_id=hashlib.sha256(f"{template}{key}".encode()).hexdigest()[:16],
        proposer="tuning",
        template=template,
        params_json=key,
        source_path="sources/xx/x.cu",
        target=target,
        status="ok" if time is not None else "compile_error",
        geomean_us=time,
    )
    return Candidate(**{**fields, **values})


def frame_of(rows: list[Candidate], tmp_path: Path) -> pd.DataFrame:
    store = LineageStore(tmp_path)
    store.append(rows)
    return store.read("sim")


def in_space(proposal: Proposal, problem: Problem) -> bool:
    spec = problem.template("cuda", proposal.template)
    return set(proposal.params) == set(spec.params) and all(v in spec.params[k] for k, v in proposal.params.items())


def keys_of(frame: pd.DataFrame) -> set[tuple[str, str]]:
    return set(zip(frame["template"], frame["params_json"], strict=True))


def key(p: Proposal) -> tuple[str, str]:
    return p.template, json.dumps(p.params, sort_keys=True)


def test_empty_population_starts_from_every_default() -> None:
    problem = make_problem(MMA, NAIVE, MFMA)
    proposals = propose_tuning(problem, "cuda", empty_frame(), [], 5, seed=0)
    assert [(p.template, p.params) for p in proposals[:2]] == [("mma", MMA.default), ("naive", NAIVE.default)]
    assert all(p.parent_id is None and "never tried" in p.hypothesis for p in proposals[:2])
    assert len(proposals) == 5 and len({key(p) for p in proposals}) == 5
    assert all(in_space(p, problem) for p in proposals)
    assert propose_tuning(problem, "hip", pd.DataFrame(), [], 1, seed=0)[0].params == MFMA.default


def test_proposals_are_new_distinct_in_space_and_deterministic(tmp_path: Path) -> None:
    problem = make_problem(MMA, NAIVE, MFMA)
    points = [MMA.default, {**MMA.default, "BN": 128}, {**MMA.default, "BK": 64, "STAGES": 4}, BEST_MMA]
    rows = [evaluated("mma", p) for p in points] + [evaluated("naive", NAIVE.default)]
    rows.append(evaluated("mfma", MFMA.default, target="rocm"))  # another dialect: ignored
    frame = frame_of(rows, tmp_path)
    selections = select_parents("elitist", frame[frame["target"] == "cuda"], 2, seed=0)
    proposals = propose_tuning(problem, "cuda", frame, selections, 12, seed=3)
    assert len(proposals) == 12
    assert all(in_space(p, problem) for p in proposals)
    assert len({key(p) for p in proposals}) == 12
    assert not {key(p) for p in proposals} & keys_of(frame)
    assert proposals == propose_tuning(problem, "cuda", frame, selections, 12, seed=3)
    assert proposals != propose_tuning(problem, "cuda", frame, selections, 12, seed=4)
    known = set(frame["candidate_id"])
    assert all(p.parent_id is None or p.parent_id in known for p in proposals)


def test_points_in_flight_are_never_proposed_again(tmp_path: Path) -> None:
    problem = make_problem(MMA, NAIVE)
    frame = frame_of([evaluated("mma", MMA.default), evaluated("naive", NAIVE.default)], tmp_path)
    selections = select_parents("elitist", frame, 2, seed=0)
    earlier = propose_tuning(problem, "cuda", frame, selections, 6, seed=5)  # a generation still running
    later = propose_tuning(problem, "cuda", frame, selections, 6, seed=5, in_flight=earlier)
    assert len(later) == 6 and not {key(p) for p in later} & {key(p) for p in earlier}
    assert not {key(p) for p in later} & keys_of(frame)
    assert later == propose_tuning(problem, "cuda", frame, selections, 6, seed=5, in_flight=earlier)


def test_neighbours_of_the_parent_come_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ksci.proposers.optuna_search, "SWITCH_PROBABILITY", 0.0)
    problem = make_problem(MMA, NAIVE)
    parent = evaluated("mma", MMA.default)
    frame = frame_of([parent, evaluated("naive", NAIVE.default)], tmp_path)
    selection = Selection(parent.candidate_id, "f" * 16, "test")
    proposals = propose_tuning(problem, "cuda", frame, [selection], 4, seed=1)
    pattern = rf"mma: (\w+) (\d+) -> (\d+) \(neighbour of parent {parent.candidate_id}, geomean [\d.]+ us\)"
    for p in proposals:
        changed = [k for k in MMA.params if p.params[k] != MMA.default[k]]
        assert len(changed) == 1, p
        values = MMA.params[changed[0]]
        assert abs(values.index(p.params[changed[0]]) - values.index(MMA.default[changed[0]])) == 1
        match = re.fullmatch(pattern, p.hypothesis)
        assert match and match.groups() == (changed[0], str(MMA.default[changed[0]]), str(p.params[changed[0]]))
        assert (p.parent_id, p.reference_id) == (parent.candidate_id, "f" * 16)


def test_the_first_selection_gets_every_other_parent_turn_and_every_selection_gets_turns() -> None:
    """With the turns between shape turns, parents[turn % len] gave an even number of selections' odd-ranked ones no
    turn; now the first (the incumbent, under elitist) takes every other turn and the rest rotate from the offset."""
    for parents in (2, 3, 8):
        for offset in range(parents - 1):
            order = [_parent_turn(turn, parents, offset) for turn in range(4 * parents)]
            assert order[::2] == [0] * (2 * parents)
            assert set(order[1::2]) == set(range(1, parents))
    assert [_parent_turn(turn, 1, 0) for turn in range(4)] == [0, 0, 0, 0]
    # Four turns a call (a generation of 8 with shape turns between): over the offsets every selection is reached.
    reached = {_parent_turn(turn, 8, offset) for offset in range(7) for turn in range(4)}
    assert reached == set(range(8))


def test_untried_family_starts_from_its_default(tmp_path: Path) -> None:
    problem = make_problem(MMA, NAIVE)
    frame = frame_of([evaluated("mma", MMA.default)], tmp_path)
    proposals = propose_tuning(problem, "cuda", frame, select_parents("elitist", frame, 1, seed=0), 3, seed=0)
    assert proposals[0] == Proposal("naive", NAIVE.default, None, None, "naive: default BLOCK=128; family never tried")
    assert all(p.template == "mma" for p in proposals[1:])


def test_switching_family_samples_the_other_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ksci.proposers.optuna_search, "SWITCH_PROBABILITY", 1.0)
    problem = make_problem(MMA, NAIVE)
    mma, naive = evaluated("mma", MMA.default), evaluated("naive", NAIVE.default)
    frame = frame_of([mma, naive], tmp_path)
    proposals = propose_tuning(problem, "cuda", frame, [Selection(mma.candidate_id, None, "")], 5, seed=0)
    switched, rest = proposals[:2], proposals[2:]
    assert [p.params["BLOCK"] for p in switched] in ([64, 256], [256, 64])  # all naive points left
    assert all(p.template == "naive" and p.parent_id == naive.candidate_id for p in switched)
    assert all(p.reference_id == mma.candidate_id and "switch from mma" in p.hypothesis for p in switched)
    assert len(rest) == 3 and all(p.template == "mma" for p in rest)  # naive is spent: back to mma
    assert space_note(problem, "cuda", frame, proposals).startswith(
        "all 3 points of naive tried, so the next candidates come from mma (to try more, add values"
    )


def test_exhausted_space_returns_fewer(tmp_path: Path) -> None:
    problem = make_problem(TINY)
    frame = frame_of([evaluated("tiny", {"X": 1})], tmp_path)
    proposals = propose_tuning(problem, "cuda", frame, select_parents("elitist", frame, 1, seed=0), 5, seed=0)
    assert [p.params for p in proposals] == [{"X": 2}]
    frame = frame_of([evaluated("tiny", {"X": 2})], tmp_path)
    assert propose_tuning(problem, "cuda", frame, [], 5, seed=0) == []
    assert propose_tuning(problem, "cuda", frame, [], 0, seed=0) == []
    assert propose_tuning(problem, "hip", frame, [], 3, seed=0) == []  # no template for the dialect
    assert propose_tuning(make_problem(FIXED), "cuda", empty_frame(), [], 3, seed=0) == [
        Proposal("fixed", {}, None, None, "fixed: default (no parameters); family never tried")
    ]
    frame = frame_of([evaluated("fixed", {})], tmp_path)
    assert propose_tuning(make_problem(FIXED), "cuda", frame, [], 3, seed=0) == []


def test_failures_are_infeasible_trials_and_timings_complete_ones(tmp_path: Path) -> None:
    rows = [evaluated("mma", MMA.default), evaluated("mma", {**MMA.default, "BK": 64, "STAGES": 4})]
    rows.append(evaluated("mma", BEST_MMA, status="compiled", geomean_us=None))  # not timed: not a trial
    study = _study(MMA, frame_of(rows, tmp_path), seed=0)
    trials = study.get_trials()
    assert len(trials) == 2
    assert trials[0].value == simulated_time("mma", MMA.default) and trials[0].constraints == {}
    assert trials[1].constraints == {"ok": 1.0} and trials[1].value > trials[0].value


def test_tuning_loop_improves_on_a_recorded_timing_table(tmp_path: Path) -> None:
    """Select, propose, 'measure' from the table, record; the best time falls towards the table's optimum."""
    problem = make_problem(MMA, NAIVE)
    store = LineageStore(tmp_path)
    best = []
    for generation in range(10):
        population = store.read("sim")
        selections = select_parents("elitist", population, 2, seed=generation)
        proposals = propose_tuning(problem, "cuda", population, selections, 4, seed=generation)
        assert proposals and not {key(p) for p in proposals} & (keys_of(population) if len(population) else set())
        rows = [
            evaluated(p.template, p.params, generation, parent_id=p.parent_id, hypothesis=p.hypothesis)
            for p in proposals
        ]
        assert store.append(rows) == len(rows)
        best.append(float(store.best("sim")["geomean_us"]))
    optimum = simulated_time("mma", BEST_MMA)
    default = simulated_time("mma", MMA.default)
    assert all(b2 <= b1 for b1, b2 in zip(best, best[1:], strict=False))
    assert best[-1] < best[0] and best[-1] < 0.5 * default
    # It reaches the optimum within 40 of the 195 points (random search would find it about one time in five).
    assert best[-1] == optimum, best
    assert len(store.read("sim")) <= 40


TILED = TemplateSpec(
    "tiled",
    "cuda",
    Path("tiled.cu.j2"),
    {"A": [1, 2, 4, 8], "B": [1, 2, 4, 8]},
    {"A": 2, "B": 2},
    (parse_constraint("A * B <= 8", {"A", "B"}), parse_constraint("A >= B // 2", {"A", "B"})),
)
SHAPES = ({"m": 1, "seed": 0}, {"m": 2, "seed": 0})  # shape keys "1" and "2"


def timed(name: str, params: dict, generation: int, times: dict[str, float], **values) -> Candidate:
    """A row timed on SHAPES: `times` per shape key, the geomean from them."""
    geomean = math.exp(sum(map(math.log, times.values())) / len(times))
    key = json.dumps(params, sort_keys=True)
    fields = dict(
        run="sim",
        problem="toy",
        generation=generation,
        candidate_id=hashlib.sha256(f"{name}{key}".encode()).hexdigest()[:16],
        proposer="tuning",
        template=name,
        params_json=key,
        source_path="sources/xx/x.cu",
        target="cuda",
        status="ok",
        geomean_us=geomean,
        shape_times_json=json.dumps(times),
    )
    return Candidate(**{**fields, **values})


def tiled_times(params: dict) -> dict[str, float]:
    """Shape 1 likes a large A, shape 2 a large B."""
    return {"1": 100.0 / params["A"] + params["B"], "2": 100.0 / params["B"] + params["A"]}


def test_no_point_violates_a_constraint_or_repeats_until_the_space_is_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ksci.proposers.per_shape, "composable", lambda spec: True)  # the toy templates have no files
    problem = replace(make_problem(TILED), benchmarks=SHAPES)
    space = [{"A": a, "B": b} for a in TILED.params["A"] for b in TILED.params["B"]]
    feasible = [p for p in space if TILED.feasible(p)]
    assert 0 < len(feasible) < len(space)
    store, proposed, compositions = LineageStore(tmp_path), [], []
    for generation in range(20):
        population = store.read("sim")
        selections = select_parents("elitist", population, 2, seed=generation)
        proposals = propose_tuning(problem, "cuda", population, selections, 3, seed=generation)
        if not proposals:
            break
        assert proposals == propose_tuning(problem, "cuda", population, selections, 3, seed=generation)
        points = [p for p in proposals if not p.by_shape]
        assert all(TILED.feasible(p.params) for p in points), points
        proposed += [key(p) for p in points]
        compositions += [json.dumps(p.by_shape, sort_keys=True) for p in proposals if p.by_shape]
        rows = [timed(p.template, p.params, generation, tiled_times(p.params)) for p in points]
        rows += [timed("x", {}, generation, {"1": 50.0, "2": 50.0}, candidate_id=f"{generation:016d}", template=None,
                       params_json=None, kind="composed", params_by_shape_json=json.dumps(p.by_shape))
                 for p in proposals if p.by_shape]  # fmt: skip
        store.append(rows)
    assert len(proposed) == len(set(proposed)) == len(feasible)  # every feasible point once, and nothing else
    assert compositions and len(compositions) == len(set(compositions))
    note = space_note(problem, "cuda", store.read("sim"), [])
    assert (
        note
        == f"every point the cuda templates allow has been tried (all {len(feasible)} points of tiled): nothing is left "
        "to propose; to try more, add values to a template's params in problem.yaml or loosen its constraints, or let "
        "the LLM write kernels (--proposer llm)"
    )


def test_the_per_shape_winners_are_composed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ksci.proposers.per_shape, "composable", lambda spec: True)  # the toy templates have no files
    problem = replace(make_problem(TILED), benchmarks=SHAPES)
    points = [{"A": 2, "B": 2}, {"A": 8, "B": 1}, {"A": 1, "B": 2}]
    rows = [timed("tiled", p, 0, tiled_times(p)) for p in points]
    frame = frame_of(rows, tmp_path)
    selections = select_parents("elitist", frame, 2, seed=0)
    proposals = propose_tuning(problem, "cuda", frame, selections, 4, seed=0)
    composed = proposals[0]
    assert composed.by_shape and composed.template is None and composed.params is None
    best = min(rows, key=lambda r: r.geomean_us)
    winner = {k: min(rows, key=lambda r: json.loads(r.shape_times_json)[k]) for k in ("1", "2")}
    assert composed.by_shape["default"] == {"template": "tiled", "params": json.loads(best.params_json)}
    for k, row in winner.items():
        assert composed.by_shape["shapes"][k] == {"template": "tiled", "params": json.loads(row.params_json)}
    assert composed.parent_id == best.candidate_id and composed.reference_id in {r.candidate_id for r in rows}
    assert composed.hypothesis.startswith("composed of 2 points by shape")
    assert any(p.hypothesis.startswith("for shape ") for p in proposals[1:])  # shape turns
    again = propose_tuning(problem, "cuda", frame, selections, 4, seed=0, in_flight=[composed])
    assert not any(p.by_shape for p in again)  # in flight: not proposed twice
    recorded = timed("x", {}, 1, {"1": 9.0, "2": 9.0}, candidate_id="c" * 16, template=None, params_json=None,
                     kind="composed", params_by_shape_json=json.dumps(composed.by_shape, sort_keys=True))  # fmt: skip
    frame = frame_of([*rows, recorded], tmp_path)
    assert not any(p.by_shape for p in propose_tuning(problem, "cuda", frame, selections, 4, seed=0))


def test_no_composition_without_a_gain_or_composable_templates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = replace(make_problem(TILED), benchmarks=SHAPES)
    rows = [timed("tiled", p, 0, tiled_times(p)) for p in ({"A": 2, "B": 2}, {"A": 8, "B": 1})]
    frame = frame_of(rows, tmp_path)
    assert not any(p.by_shape for p in propose_tuning(problem, "cuda", frame, [], 4, seed=0))  # no template file
    monkeypatch.setattr(ksci.proposers.per_shape, "composable", lambda spec: True)
    assert propose_tuning(problem, "cuda", frame, [], 4, seed=0)[0].by_shape
    same = [
        timed("tiled", p, 0, {"1": 10.0 * p["A"], "2": 10.0 * p["A"]}) for p in ({"A": 1, "B": 1}, {"A": 2, "B": 1})
    ]
    frame = frame_of(same, tmp_path / "same")
    assert not any(p.by_shape for p in propose_tuning(problem, "cuda", frame, [], 4, seed=0))  # one point wins all


def test_a_point_clearly_faster_on_one_shape_joins_the_composition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variant joins when it is MIN_SHAPE_GAIN faster than the composition so far on some shape, however little it
    moves the geomean of ten shapes; one that is faster only within that margin (noise) does not."""
    monkeypatch.setattr(ksci.proposers.per_shape, "composable", lambda spec: True)
    shapes = tuple({"m": i, "seed": 0} for i in range(1, 11))
    problem = replace(make_problem(TILED), benchmarks=shapes)

    def times(fast: dict[str, float], rest: float) -> dict[str, float]:
        return {str(i): fast.get(str(i), rest) for i in range(1, 11)}

    default, wide, one_shape, noise = {"A": 2, "B": 2}, {"A": 4, "B": 2}, {"A": 2, "B": 1}, {"A": 1, "B": 1}
    rows = [
        timed("tiled", default, 0, times({}, 100.0)),
        timed("tiled", wide, 0, times({"1": 50.0}, 200.0)),
        timed("tiled", one_shape, 0, times({"2": 98.0}, 101.0)),  # 2 % on one shape: 0.2 % on the geomean
        timed("tiled", noise, 0, times({"3": 99.5}, 120.0)),  # 0.5 %: within the margin
    ]
    proposals = propose_tuning(problem, "cuda", frame_of(rows, tmp_path), [], 4, seed=0)
    composed = proposals[0]
    assert composed.hypothesis.startswith("composed of 3 points by shape")
    chosen = {k: composed.by_shape["shapes"][k]["params"] for k in ("1", "2", "3", "4")}
    assert chosen == {"1": wide, "2": one_shape, "3": default, "4": default}


# Neighbours across a constraint (ksci.proposers.space.neighbours): a move that violates a declared constraint is
# repaired by the nearest feasible point that keeps it: fewest other parameters moved (at most three), then fewest
# list positions moved, then declaration order, lower value first. Where one adjacent step of another parameter
# fits, that is the repair, the first such step in that order.
KMAJOR = load_problem("fp8_gemm_kmajor")
WGMMA = KMAJOR.template("cuda", "wgmma")
# Three consumers (OVERLAP 0: they have no room for a second temporary); EPI 0 -> 1 alone overflows shared memory.
C3 = {**WGMMA.default, "CONSUMERS": 3, "BM": 192, "STAGES": 5, "EPI": 0, "OVERLAP": 0}
C3_EPI = {**C3, "STAGES": 4, "EPI": 1}  # the best single point measured on the M = 6144 shapes (H100)
PAIRS = TemplateSpec(
    "pairs",
    "cuda",
    Path("pairs.cu.j2"),
    {"A": [1, 2, 4, 8], "B": [1, 2, 4, 8], "C": [0, 1]},
    {"A": 4, "B": 2, "C": 0},
    (parse_constraint("A * B <= 8", {"A", "B", "C"}), parse_constraint("A <= 4", {"A", "B", "C"})),
)
SUMS = TemplateSpec(
    "sums", "cuda", Path("sums.cu.j2"), {"X": [1, 2, 3], "Y": [1, 2, 3], "Z": [1, 2, 3]}, {"X": 1, "Y": 2, "Z": 2},
    (parse_constraint("X + Y + Z != 6", {"X", "Y", "Z"}),),
)  # fmt: skip
EQUAL = TemplateSpec(
    "equal", "cuda", Path("equal.cu.j2"), {"A": [1, 2, 3], "B": [1, 2, 3]}, {"A": 2, "B": 2},
    (parse_constraint("A == B", {"A", "B"}),),
)  # fmt: skip


def differences(move: Move, params: dict) -> dict:
    return {k: (params[k], v) for k, v in move.params.items() if v != params[k]}


def test_a_move_over_a_constraint_is_repaired_by_one_more_step() -> None:
    assert WGMMA.feasible(C3) and not WGMMA.feasible({**C3, "EPI": 1}) and WGMMA.feasible(C3_EPI)
    moves = {m.step.describe(): m for m in neighbours(WGMMA, C3)}
    epi = moves["EPI 0 -> 1"]
    assert epi.params == C3_EPI
    assert (epi.step, epi.repair) == (Step("EPI", 0, 1), (Step("STAGES", 5, 4),))
    assert epi.describe() == "EPI 0 -> 1 (STAGES 5 -> 4 to fit)"
    assert moves["STAGES 5 -> 4"].repair == () and moves["STAGES 5 -> 4"].describe() == "STAGES 5 -> 4"
    # No single adjacent step makes six stages fit with three consumers (BN 112 is still too wide): the nearest
    # repair moves BN two places down its list rather than two parameters (BM 192 -> 128 and CONSUMERS 3 -> 2).
    assert moves["STAGES 5 -> 6"].describe() == "STAGES 5 -> 6 (BN 128 -> 96 to fit)"


def test_an_unrepairable_move_is_dropped_and_repairs_follow_the_declared_order() -> None:
    moves = neighbours(PAIRS, PAIRS.default)
    assert [m.describe() for m in moves] == [
        "A 4 -> 2",
        "B 2 -> 1",
        "C 0 -> 1",
        "B 2 -> 4 (A 4 -> 2 to fit)",  # A 4 -> 8 breaks A <= 4 whatever else moves: dropped
    ]
    assert all(PAIRS.feasible(m.params) for m in moves)
    # X 1 -> 2 alone sums to 6; Y 2 -> 1, Y 2 -> 3, Z 2 -> 1 and Z 2 -> 3 would each repair it: the first is taken.
    assert [m.describe() for m in neighbours(SUMS, SUMS.default)] == [
        "Y 2 -> 1",
        "Z 2 -> 1",
        "X 1 -> 2 (Y 2 -> 1 to fit)",
        "Y 2 -> 3 (X 1 -> 2 to fit)",
        "Z 2 -> 3 (X 1 -> 2 to fit)",
    ]


def test_no_neighbour_is_returned_twice() -> None:
    # EQUAL has no plain neighbour. B 2 -> 1 is repaired by A 2 -> 1: the point of "A 2 -> 1 (B 2 -> 1 to fit)",
    # returned already, so it is dropped (likewise B 2 -> 3). A repaired point moves the step's parameter and those of
    # its repair, a plain one only the step's.
    assert [m.describe() for m in neighbours(EQUAL, EQUAL.default)] == [
        "A 2 -> 1 (B 2 -> 1 to fit)",
        "A 2 -> 3 (B 2 -> 3 to fit)",
    ]
    points = [C3, WGMMA.default, *random.Random(0).sample(_feasible_points(WGMMA), 200)]
    for params in points:
        moves = neighbours(WGMMA, params)
        keys = [json.dumps(m.params, sort_keys=True) for m in moves]
        assert len(keys) == len(set(keys)) and json.dumps(params, sort_keys=True) not in keys
        for move in moves:
            steps = [move.step, *move.repair]
            assert WGMMA.feasible(move.params)
            assert differences(move, params) == {s.name: (s.old, s.new) for s in steps}
            repaired = [s.name for s in move.repair]  # in declaration order, at most three
            assert len(repaired) <= 3 and repaired == [k for k in WGMMA.params if k in repaired]
    assert "CONSUMERS 3 -> 2" not in {m.step.describe() for m in neighbours(WGMMA, C3)}  # = BM 192 -> 128 repaired


def test_the_default_reaches_three_consumers_in_one_move() -> None:
    # BM 128 -> 192 fits only with CONSUMERS 2 -> 3 (BM % (64 * CONSUMERS)), OVERLAP 1 -> 0 (three consumers have no
    # room for it) and one stage less (shared memory); EPI 1 -> 0 would fit as well as STAGES 5 -> 4, but STAGES
    # comes first in the declaration.
    (move,) = [m for m in neighbours(WGMMA, WGMMA.default) if m.step == Step("BM", 128, 192)]
    assert move.params == {**WGMMA.default, "BM": 192, "CONSUMERS": 3, "STAGES": 4, "OVERLAP": 0}
    assert WGMMA.feasible(move.params)
    assert move.describe() == "BM 128 -> 192 (CONSUMERS 2 -> 3, STAGES 5 -> 4, OVERLAP 1 -> 0 to fit)"
    # The bounded search of a space too large to enumerate (adjacent steps of up to three others) agrees here.
    moved = {**WGMMA.default, "BM": 192}
    assert _repair_by_steps(WGMMA, moved, "BM") == _repair(WGMMA, moved, "BM") == move.repair


# X 1 -> 2 breaks X <= Y and X <= Z: it needs Y 1 -> 2 and either Z 1 -> 2 or W 0 -> 2 (W two places up).
LADDER = TemplateSpec(
    "ladder", "cuda", Path("ladder.cu.j2"),
    {"W": [0, 1, 2, 3], "X": [1, 2], "Y": [0, 1, 2, 3], "Z": [0, 1, 2, 3]}, {"W": 0, "X": 1, "Y": 1, "Z": 1},
    (parse_constraint("X <= Y and (X <= Z or W >= 2)", {"W", "X", "Y", "Z"}),),
)  # fmt: skip
# Seven parameters of eight values (2,097,152 points): over ENUMERATION_LIMIT, so repairs are searched step by step.
WIDE = TemplateSpec(
    "wide", "cuda", Path("wide.cu.j2"), {k: list(range(8)) for k in "ABCDEFG"}, dict.fromkeys("ABCDEFG", 3),
    (parse_constraint("A <= B and A <= C and D + E + F != 10", set("ABCDEFG")),),
)  # fmt: skip


def test_a_move_that_needs_two_repairs_takes_the_nearest() -> None:
    # Two positions moved (Y, Z) beat three (W two places, Y), though W comes first in the declaration; one
    # parameter moved two places (W 0 -> 2) beats two parameters moved one place each. Y 1 -> 0 fits nothing.
    assert [m.describe() for m in neighbours(LADDER, LADDER.default)] == [
        "W 0 -> 1",
        "Y 1 -> 2",
        "Z 1 -> 2",
        "X 1 -> 2 (Y 1 -> 2, Z 1 -> 2 to fit)",
        "Z 1 -> 0 (W 0 -> 2 to fit)",
    ]
    assert all(LADDER.feasible(m.params) for m in neighbours(LADDER, LADDER.default))
    # A wide space: the bounded search takes the fewest parameters, then declaration order, lower value first.
    wide = {m.step.describe(): m.describe() for m in neighbours(WIDE, WIDE.default)}
    assert _feasible_points(WIDE) is None
    assert wide["A 3 -> 4"] == "A 3 -> 4 (B 3 -> 4, C 3 -> 4 to fit)"
    assert wide["B 3 -> 2"] == "B 3 -> 2 (A 3 -> 2 to fit)"
    assert wide["D 3 -> 4"] == "D 3 -> 4 (E 3 -> 2 to fit)"  # E 3 -> 4 fits too: the lower value comes first


def test_repaired_neighbours_are_proposed_deterministically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ksci.proposers.optuna_search, "SWITCH_PROBABILITY", 0.0)
    assert neighbours(WGMMA, C3) == neighbours(WGMMA, C3)
    parent = timed("wgmma", C3, 0, {"1": 300.0, "2": 300.0}, shape_times_json="{}")
    frame = frame_of([parent], tmp_path)
    selection = Selection(parent.candidate_id, None, "test")
    count = len(neighbours(WGMMA, C3))
    proposals = propose_tuning(KMAJOR, "cuda", frame, [selection], count, seed=2)
    assert proposals == propose_tuning(KMAJOR, "cuda", frame, [selection], count, seed=2)
    expected = sorted(("wgmma", json.dumps(m.params, sort_keys=True)) for m in neighbours(WGMMA, C3))
    assert sorted(key(p) for p in proposals) == expected  # the parent's neighbours come first, repaired ones too
    (epi,) = [p for p in proposals if p.params == C3_EPI]
    neighbour_of = f"(neighbour of parent {parent.candidate_id}, geomean 300.0 us)"
    assert epi.hypothesis == f"wgmma: EPI 0 -> 1 (STAGES 5 -> 4 to fit) {neighbour_of}"
    assert epi.parent_id == parent.candidate_id
