"""Per-shape evidence for the tuning proposer (docs/tuning.md): each benchmark shape's fastest point, the weight of
each shape for the proposer's shape turns, and the composition of the per-shape winners into one kernel."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from ksci.evaluate.results import Status
from ksci.lineage.store import shape_times
from ksci.problem.compose import plan_of, split_includes
from ksci.problem.render import render_kernel
from ksci.problem.spec import Problem, TemplateSpec, shape_key

MAX_VARIANTS = 6  # points in one composed kernel (each one is compiled into it)
MIN_VARIANT_GAIN = 0.005  # a composition is proposed if it predicts a log-geomean this much below the best point's
MIN_SHAPE_GAIN = 0.01  # a variant joins it if it is this much faster than the composition so far on some shape
SHAPE_FLOOR = 0.1  # every shape keeps this share of the mean log-gap as weight, so that none is never tuned


@dataclass(frozen=True)
class Composition:
    plan: dict  # ksci.problem.compose's plan: the default point and the point of each benchmark shape
    parent_id: str  # the best single point, the default variant
    reference_id: str  # the variant added first
    hypothesis: str


class ShapeEvidence:
    """Per-shape evidence of the timed template points: each shape's winner, the weight of each shape for the shape
    turns, and the composition of the winners.

    D is the best single point by geomean and b_s the best time known on shape s. The log of the geomean is the mean
    of the per-shape logs, so gap_s = log t_D(s) - log b_s is what specialising shape s has gained so far, and a
    shape's weight is its share of the sum of gaps (plus SHAPE_FLOOR of the mean, so that no shape is left out):
    shapes whose best parameters differ most from D's are where tuning per shape pays."""

    def __init__(self, problem: Problem, rows: pd.DataFrame, templates: dict, params_of: Callable) -> None:
        """`rows`: the template points of one dialect; `params_of(row, templates)`: a row's full point or None."""
        self.problem, self.templates = problem, templates
        self.keys = [shape_key(s) for s in problem.benchmarks]
        timed = rows[(rows["status"] == str(Status.OK)) & rows["geomean_us"].notna()]
        self.points: list[tuple[pd.Series, dict, dict[str, float]]] = []
        for _, row in timed.sort_values(["geomean_us", "candidate_id"], kind="stable").iterrows():
            times = shape_times(row["shape_times_json"])
            params = params_of(row, templates)
            if params is not None and self.keys and all(times.get(k, 0) > 0 for k in self.keys):
                self.points.append((row, params, times))
        self.weights: dict[str, float] = {}
        if len(self.points) < 2:
            return
        best = self.points[0][2]
        gaps = {k: math.log(best[k]) - math.log(self.winner(k)[2][k]) for k in self.keys}
        total = sum(gaps.values())
        if total > 0:
            floor = SHAPE_FLOOR * total / len(gaps)
            self.weights = {k: (g + floor) / (total + floor * len(gaps)) for k, g in gaps.items()}

    def winner(self, key: str) -> tuple[pd.Series, dict, dict[str, float]]:
        return min(self.points, key=lambda p: (p[2][key], p[0]["candidate_id"]))

    def draw(self, rng: random.Random) -> str:
        return rng.choices(list(self.weights), weights=list(self.weights.values()))[0]

    def composition(self) -> Composition | None:
        """The per-shape winners as one composed candidate, when that predicts a gain over the best single point.

        Variants are chosen greedily from the timed points: start from D (the default, for every shape not listed
        and the test shapes), then add, among the points at least MIN_SHAPE_GAIN faster than the composition so far
        on some shape, the one that lowers the predicted log-geomean most, while there are fewer than MAX_VARIANTS;
        each shape takes the chosen variant fastest on it (ties: the earlier chosen). The composition is proposed
        when it predicts a log-geomean at least MIN_VARIANT_GAIN below D's. (A variant is not held to a geomean
        gain: one that is 2 % faster on a single shape of 18 lowers the geomean by 0.1 %, yet on that shape it is
        what a user wants: 6144x4608x7168's TAIL_N 96 point, 281 against 286 us, H200, 2026-11-29, was left out.)"""
        candidates = [p for p in self.points if composable(self.templates[p[0]["template"]])]
        if len(candidates) < 2 or candidates[0] is not self.points[0]:
            return None
        chosen, current = [0], dict(candidates[0][2])  # indices into candidates
        while len(chosen) < MAX_VARIANTS:
            gains = [
                (_gain(current, p[2]), i)
                for i, p in enumerate(candidates)
                if i not in chosen and _faster_somewhere(current, p[2])
            ]
            gain, best = max(gains, key=lambda g: (g[0], -g[1]), default=(0.0, None))
            if best is None:
                break
            chosen.append(best)
            current = {k: min(t, candidates[best][2][k]) for k, t in current.items()}
        if len(chosen) < 2 or _gain(candidates[0][2], current) < MIN_VARIANT_GAIN:
            return None
        rows = [candidates[i][0] for i in chosen]
        points = [{"template": candidates[i][0]["template"], "params": candidates[i][1]} for i in chosen]
        fastest = {k: min(range(len(chosen)), key=lambda j, k=k: candidates[chosen[j]][2][k]) for k in self.keys}
        predicted = math.exp(sum(math.log(t) for t in current.values()) / len(current))
        variants = ", ".join(f"{r['candidate_id']} ({r['template']})" for r in rows)
        text = (
            f"composed of {len(chosen)} points by shape: {variants}; the per-shape winners predict a geomean of "
            f"{predicted:.1f} us against {float(rows[0]['geomean_us']):.1f} us for the best single point"
        )
        plan = plan_of(points[0], {k: points[j] for k, j in fastest.items()})
        return Composition(plan, rows[0]["candidate_id"], rows[1]["candidate_id"], text)


def best_shape_times(population: pd.DataFrame) -> tuple[tuple[str, float], ...]:
    """The run's best median per benchmark shape so far, over its `ok` rows (shape key, us), sorted by key: what a
    racing benchmark (ksci evolve --race) holds each new candidate against. Rows without per-shape times (simulated
    rows of an older store, failures) add nothing."""
    if population.empty or "shape_times_json" not in population:
        return ()
    best: dict[str, float] = {}
    ok = population[population["status"] == str(Status.OK)]
    for text in ok["shape_times_json"]:
        for key, us in shape_times(text).items():
            if isinstance(us, (int, float)) and us > 0 and us < best.get(key, math.inf):
                best[key] = float(us)
    return tuple(sorted(best.items()))


def _faster_somewhere(current: dict[str, float], times: dict[str, float]) -> bool:
    """Whether a variant with these times is at least MIN_SHAPE_GAIN faster than the composition on some shape."""
    return any(times[k] <= t * (1 - MIN_SHAPE_GAIN) for k, t in current.items())


def _gain(current: dict[str, float], times: dict[str, float]) -> float:
    """How much a variant with these times lowers the mean log time of the composition."""
    return sum(max(0.0, math.log(t) - math.log(times[k])) for k, t in current.items()) / len(current)


_COMPOSABLE: dict[str, bool] = {}


def composable(spec: TemplateSpec) -> bool:
    """Whether the template's default renders into a source that ksci.problem.compose can split (all #includes first)."""
    key = f"{spec.dialect}/{spec.path}"
    if key not in _COMPOSABLE:
        try:
            _COMPOSABLE[key] = not isinstance(split_includes(render_kernel(spec)), str)
        except Exception:  # a template that does not render is not composable; rendering it alone will say why
            _COMPOSABLE[key] = False
    return _COMPOSABLE[key]
