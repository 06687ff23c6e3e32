"""The seed templates' parameter spaces as the tuning proposer walks them (docs/tuning.md): a proposal and its key,
the points of a family that satisfy its declared constraints (ksci.problem.constraints), which of them are taken
(evaluated, in flight or proposed), a point's neighbours, and what is left to try (space_note, needs_template).

No Optuna here: the search that draws new points is ksci.proposers.optuna_search, and the Proposer that runs it in
a generation is ksci.proposers.tuning_proposer.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ksci.problem.spec import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT, Problem, TemplateSpec

# Spaces up to this size are enumerated (exhaustion known, repairs among all feasible points); larger ones are
# sampled. fp8_gemm_kmajor's wgmma space (829,440 points, 22,116 feasible) takes about 0.6 s once a process (5 s
# for half as many when the whole product was filtered).
ENUMERATION_LIMIT = 1_000_000
COMPOSED = "<composed>"  # the template part of a composed proposal's key


@dataclass(frozen=True)
class Proposal:
    """One point of a template to evaluate, or a composition of points by shape (by_shape), and why."""

    template: str | None  # None for a composed proposal
    params: dict | None
    parent_id: str | None
    reference_id: str | None
    hypothesis: str
    by_shape: dict | None = None  # a composed proposal's plan (ksci.problem.compose: default point and point per shape)

    @property
    def key(self) -> tuple[str, str]:
        return (
            (COMPOSED, json.dumps(self.by_shape, sort_keys=True)) if self.by_shape else _key(self.template, self.params)
        )


def needs_template(problem: Problem, dialect: str) -> str:
    """Why the tuning proposer has nothing to tune on `problem` (it has no seed template in `dialect`), and where to
    add one; empty when it has one. An imported problem starts without any (docs/problem-format.md)."""
    if problem.templates_for(dialect):
        return ""
    suffix = SUFFIX_OF_DIALECT.get(dialect, "") + ".j2"
    return (
        f"problem {problem.name!r} has no {dialect} seed template, and the tuning proposer tunes templates' "
        f"parameters: add one as {problem.root}/templates/{dialect}/NAME{suffix} and list it under templates: "
        f"{dialect}: in its problem.yaml (docs/problem-format.md), or let the LLM write generation 0 from the "
        "reference (--proposer llm)"
    )


def space_note(problem: Problem, dialect: str, population: pd.DataFrame, proposals: list[Proposal]) -> str:
    """What a run has left to try: which families' feasible spaces are spent by the population and `proposals`
    (this generation's and those in flight); empty when every family has room. Without a template: why not."""
    templates = {t.name: t for t in problem.templates_for(dialect)}
    if not templates:
        return needs_template(problem, dialect)
    rows = rows_of_dialect(population, dialect, templates)
    points = [(r["template"], params_of(r, templates)) for _, r in rows.iterrows()]
    points += [(p.template, p.params) for p in proposals if not p.by_shape]
    batch = Batch(0, templates, [(n, p) for n, p in points if p is not None])
    spent = [n for n in templates if n not in batch.open_templates()]
    if not spent:
        return ""
    tried = " and ".join(f"all {batch.size[n]} points of {n}" for n in spent)
    widen = "to try more, add values to a template's params in problem.yaml or loosen its constraints"
    if len(spent) == len(templates):
        return (
            f"every point the {dialect} templates allow has been tried ({tried}): nothing is left to propose; "
            f"{widen}, or let the LLM write kernels (--proposer llm)"
        )
    rest = ", ".join(n for n in templates if n not in spent)
    return f"{tried} tried, so the next candidates come from {rest} ({widen})"


class Batch:
    """The proposals so far, and every point already evaluated, in flight or proposed; which families have room."""

    def __init__(self, count: int, templates: dict, points: list[tuple[str, dict]]) -> None:
        self.count, self.templates, self.proposals = count, templates, []
        self.seen = {_key(name, params) for name, params in points}
        self.space = {name: _feasible_points(spec) for name, spec in templates.items()}
        self.size = {name: len(space) if space is not None else None for name, space in self.space.items()}
        feasible = {(name, key) for name, key in self.seen if name in templates}
        self.used = {
            name: sum(1 for n, key in feasible if n == name and _fits(templates[n], key)) for name in templates
        }

    @property
    def full(self) -> bool:
        return len(self.proposals) >= self.count

    def knows(self, template: str, params: dict) -> bool:
        return _key(template, params) in self.seen

    def open_templates(self) -> list[str]:
        """The families with an untried feasible point left (a space too large to enumerate always has one)."""
        return [n for n in self.templates if self.size[n] is None or self.used[n] < self.size[n]]

    def add(self, proposal: Proposal) -> None:
        if not self.full and proposal.key not in self.seen:
            self.seen.add(proposal.key)
            self.proposals.append(proposal)
            if proposal.template in self.used:
                self.used[proposal.template] += 1


def _fits(spec: TemplateSpec, key: str) -> bool:
    params = json.loads(key)
    return (
        set(params) == set(spec.params)
        and all(v in spec.params[k] for k, v in params.items())
        and spec.feasible(params)
    )


_FEASIBLE: dict[tuple, list[dict] | None] = {}
_TABLES: dict[tuple, np.ndarray | None] = {}


def _space_key(spec: TemplateSpec) -> tuple:
    return (str(spec.path), spec.dialect, json.dumps(spec.params), tuple(c.text for c in spec.constraints))


def _feasible_points(spec: TemplateSpec) -> list[dict] | None:
    """Every point of the space that satisfies the declared constraints, in a fixed order; None if too many."""
    cache_key = _space_key(spec)
    if cache_key not in _FEASIBLE:
        if math.prod(len(v) for v in spec.params.values()) > ENUMERATION_LIMIT:
            _FEASIBLE[cache_key] = None
        else:
            _FEASIBLE[cache_key] = _enumerate(spec)
    return _FEASIBLE[cache_key]


def _enumerate(spec: TemplateSpec) -> list[dict]:
    """The feasible points in itertools.product's order over the declared lists: depth first, each constraint checked
    as soon as the last parameter it reads has a value, so that a violated prefix is not expanded (the same points
    as filtering the whole product, in a small part of the time)."""
    names = list(spec.params)
    if not names:
        return [{}] if spec.feasible({}) else []
    checks: list[list] = [[] for _ in names]
    for constraint in spec.constraints:
        last = max((names.index(n) for n in constraint.names() if n in spec.params), default=0)
        checks[last].append(constraint)
    found: list[dict] = []
    point: dict = {}

    def extend(depth: int) -> None:
        if depth == len(names):
            found.append(dict(point))
            return
        for value in spec.params[names[depth]]:
            point[names[depth]] = value
            if all(c.holds(point) for c in checks[depth]):
                extend(depth + 1)
        del point[names[depth]]

    extend(0)
    return found


def _position_table(spec: TemplateSpec) -> np.ndarray | None:
    """The feasible points as positions in their parameters' lists (a row a point, a column a parameter in
    declaration order); None where the space is too large to enumerate."""
    cache_key = _space_key(spec)
    if cache_key not in _TABLES:
        points = _feasible_points(spec)
        rows = None if points is None else [[v.index(p[k]) for k, v in spec.params.items()] for p in points]
        _TABLES[cache_key] = (
            None if rows is None else np.array(rows, dtype=np.int32).reshape(len(rows), len(spec.params))
        )
    return _TABLES[cache_key]


def rows_of_dialect(population: pd.DataFrame, dialect: str, templates: dict) -> pd.DataFrame:
    needed = ["candidate_id", "generation", "template", "params_json", "status", "geomean_us", "target"]
    needed += ["shape_times_json"]
    if population.empty or not set(needed) <= set(population.columns):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in needed})
    rows = population[population["target"].map(DIALECT_OF_TARGET.get) == dialect]
    rows = rows[rows["template"].isin(list(templates))]
    return rows.sort_values(["generation", "candidate_id"], kind="stable").reset_index(drop=True)


def params_of(row: pd.Series, templates: dict) -> dict | None:
    """The row's full parameter point (defaults filled), or None when it lies outside today's space."""
    spec = templates.get(row["template"])
    if spec is None or pd.isna(row["params_json"]):
        return None
    params = {**spec.default, **json.loads(row["params_json"])}
    if set(params) != set(spec.params) or any(v not in spec.params[k] for k, v in params.items()):
        return None
    return params


def _key(template: str, params: dict) -> tuple[str, str]:
    return template, json.dumps(params, sort_keys=True)


def composition_keys(population: pd.DataFrame, dialect: str) -> set[tuple[str, str]]:
    """The keys of the compositions already evaluated in this dialect."""
    if population.empty or "params_by_shape_json" not in population.columns:
        return set()
    mine = population[population["target"].map(DIALECT_OF_TARGET.get) == dialect]
    return {(COMPOSED, json.dumps(json.loads(t), sort_keys=True)) for t in mine["params_by_shape_json"].dropna()}


@dataclass(frozen=True)
class Step:
    """One parameter moved from `old` to an adjacent value `new` of its declared list."""

    name: str
    old: object
    new: object

    def describe(self) -> str:
        return f"{self.name} {self.old} -> {self.new}"


@dataclass(frozen=True)
class Move:
    """A feasible neighbour `params` of a point, reached by `step`; where `step` alone violates a declared
    constraint, `repair` holds the steps of other parameters (at most MAX_REPAIRS) that make it fit."""

    params: dict
    step: Step
    repair: tuple[Step, ...] = ()

    def describe(self) -> str:
        """What changed, e.g. "EPI 0 -> 1", or "EPI 0 -> 1 (STAGES 5 -> 4 to fit)" for a repaired move, or
        "BM 128 -> 192 (CONSUMERS 2 -> 3, STAGES 5 -> 4, OVERLAP 1 -> 0 to fit)" for one that needs several."""
        if not self.repair:
            return self.step.describe()
        return f"{self.step.describe()} ({', '.join(r.describe() for r in self.repair)} to fit)"


MAX_REPAIRS = 3  # the most other parameters a repair moves


def neighbours(spec: TemplateSpec, params: dict) -> list[Move]:
    """Every feasible point one step away (one parameter moved to an adjacent allowed value), then, for each step
    that violates a declared constraint, the nearest feasible point that keeps the step (_repair): fewest other
    parameters moved (at most MAX_REPAIRS), then the fewest list positions moved in all, then parameters in
    declaration order, lower values first. A step that no such repair fits is dropped; so is a repaired point
    already returned."""
    moved = [(step, _at(params, step)) for step in _steps(spec, params)]
    fits = [spec.feasible(point) for _, point in moved]
    moves = [Move(point, step) for (step, point), fit in zip(moved, fits, strict=True) if fit]
    seen = {json.dumps(m.params, sort_keys=True) for m in moves}
    for (step, point), fit in zip(moved, fits, strict=True):
        repair = () if fit else _repair(spec, point, step.name)
        repaired = _apply(point, repair)
        if repair and json.dumps(repaired, sort_keys=True) not in seen:
            seen.add(json.dumps(repaired, sort_keys=True))
            moves.append(Move(repaired, step, repair))
    return moves


def _repair(spec: TemplateSpec, moved: dict, name: str) -> tuple[Step, ...]:
    """The steps of parameters other than `name` to the nearest feasible point from the infeasible `moved` (empty
    when none within MAX_REPAIRS parameters): among the enumerated feasible points where the space is enumerated,
    any value of a parameter; in a larger space, adjacent values only (a bounded search)."""
    table = _position_table(spec)
    if table is None:
        return _repair_by_steps(spec, moved, name)
    names = list(spec.params)
    at = np.array([spec.params[k].index(moved[k]) for k in names])
    rows = table[table[:, names.index(name)] == at[names.index(name)]]
    rows = rows[(rows != at).sum(axis=1) <= MAX_REPAIRS]
    if not len(rows):
        return ()
    # Fewest parameters moved first, then fewest positions (a distance is below the sum of the lists' lengths).
    cost = (rows != at).sum(axis=1) * sum(map(len, spec.params.values())) + np.abs(rows - at).sum(axis=1)
    candidates = [_steps_to(spec, moved, row) for row in rows[cost == cost.min()]]
    return min(candidates, key=lambda steps: _order(spec, steps), default=())


def _repair_by_steps(spec: TemplateSpec, moved: dict, name: str) -> tuple[Step, ...]:
    """The first combination of adjacent steps of 1, then 2, ..., MAX_REPAIRS parameters other than `name` (in the
    order of _order) that makes `moved` feasible; empty when none does."""
    steps = [s for s in _steps(spec, moved) if s.name != name]
    for size in range(1, MAX_REPAIRS + 1):
        combinations = itertools.combinations(steps, size)
        candidates = sorted(
            (c for c in combinations if len({s.name for s in c}) == size), key=lambda c: _order(spec, c)
        )
        found = next((c for c in candidates if spec.feasible(_apply(moved, c))), None)
        if found is not None:
            return found
    return ()


def _order(spec: TemplateSpec, steps: tuple[Step, ...]) -> tuple:
    """The tie-break between repairs of equal size: parameters in declaration order, each's lower value first."""
    names = list(spec.params)
    return tuple(sorted((names.index(s.name), spec.params[s.name].index(s.new)) for s in steps))


def _steps_to(spec: TemplateSpec, params: dict, positions: np.ndarray) -> tuple[Step, ...]:
    """The steps from `params` to the point at `positions` (one a parameter it changes, in declaration order)."""
    point = {k: v[int(i)] for (k, v), i in zip(spec.params.items(), positions, strict=True)}
    return tuple(Step(k, params[k], point[k]) for k in spec.params if point[k] != params[k])


def _apply(params: dict, steps: tuple[Step, ...]) -> dict:
    return {**params, **{s.name: s.new for s in steps}}


def _steps(spec: TemplateSpec, params: dict) -> list[Step]:
    """Every step from `params`: parameters in declaration order, each to its lower adjacent value, then its higher."""
    steps = []
    for name, values in spec.params.items():
        i = values.index(params[name])
        steps += [Step(name, params[name], values[j]) for j in (i - 1, i + 1) if 0 <= j < len(values)]
    return steps


def _at(params: dict, step: Step) -> dict:
    return {**params, step.name: step.new}
