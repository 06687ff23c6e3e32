"""The tuning proposer: new points of the seed templates' parameter spaces, drawn by Optuna around the parents,
tuned per benchmark shape, and composed into one kernel that dispatches on the shape (docs/tuning.md).

It is the default proposer when no LLM is configured. In-memory Optuna studies are rebuilt from the population on
every call (ask-and-tell; TPESampler with a seed), so the lineage stays the only state and a call is a deterministic
function of the population, the points in flight and the seed. Each call proposes, in this order:
- each family never tried, at its default;
- the composition of the per-shape winners (ksci.problem.compose), when it predicts a gain and was never proposed;
- turns in alternation: a parent's turn (one study per template on the geomean: the parent's untried neighbours
  first, one parameter moved to an adjacent allowed value, then what TPE asks for; now and then another family),
  and a shape's turn (a shape drawn by its share of the log-gap between the best single point and the best time
  known on each shape; one study per template and shape on that shape's time, from the shape's winner);
- when TPE asks only repeats, untried feasible points at random.
No proposal violates the template's declared constraints (ksci.problem.constraints) or repeats a point evaluated, in flight
or proposed before; a family whose feasible space is spent is skipped (space_note says so).
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace

import optuna
import pandas as pd
from optuna.distributions import CategoricalDistribution
from optuna.samplers import TPESampler
from optuna.trial import TrialState, create_trial

from ksci.evaluate.results import Status
from ksci.problem.spec import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT, Problem, TemplateSpec
from ksci.proposers.per_shape import ShapeEvidence
from ksci.proposers.select import Selection

SWITCH_PROBABILITY = 0.1  # chance that a turn tries another template family than the parent's
ASKS_PER_PROPOSAL = 25  # bound on study.ask() calls; then untried feasible points at random fill the batch
ENUMERATION_LIMIT = 200_000  # spaces up to this size are enumerated (exhaustion known); larger ones are sampled
COMPOSED = "<composed>"  # the template part of a composed proposal's key
FAILED = {
    Status.REJECTED,
    Status.COMPILE_ERROR,
    Status.LOAD_ERROR,
    Status.RUNTIME_ERROR,
    Status.TIMEOUT,
    Status.WRONG,
    Status.SUSPICIOUS,
}


@dataclass(frozen=True)
class Proposal:
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


@dataclass
class _Parent:
    candidate_id: str
    reference_id: str | None
    template: TemplateSpec
    params: dict
    geomean_us: float | None
    neighbours: Iterator[tuple[dict, str, object, object]]
    shape: str | None = None  # a shape's winner: tuned for that shape
    shape_us: float | None = None


def propose_tuning(
    problem: Problem,
    dialect: str,
    population: pd.DataFrame,
    selections: list[Selection],
    count: int,
    seed: int,
    in_flight: list[Proposal] | None = None,
) -> list[Proposal]:
    """Up to `count` distinct proposals, none evaluated and none `in_flight` (proposed by a generation that is still
    running), none violating a declared constraint; deterministic for a fixed seed."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    templates = {t.name: t for t in problem.templates_for(dialect)}
    if count <= 0 or not templates:
        return []
    rng = random.Random(seed)
    rows = _rows_of_dialect(population, dialect, templates)
    points = [(r["template"], _params_of(r, templates)) for _, r in rows.iterrows()]
    points = [(name, params) for name, params in points if params is not None]
    points += [(p.template, p.params) for p in in_flight or [] if not p.by_shape]
    batch = _Batch(count, templates, points)
    batch.seen |= {p.key for p in in_flight or [] if p.by_shape} | _compositions(population, dialect)
    tried = set(rows["template"].dropna())
    for name, spec in templates.items():
        if name not in tried:
            hypothesis = f"{name}: default {_show(spec.default)}; family never tried"
            batch.add(Proposal(name, dict(spec.default), None, None, hypothesis))
    shapes = _Shapes(problem, rows, templates)
    composition = shapes.composed()
    if composition:
        batch.add(composition)

    studies = _Studies(templates, rows, seed)
    parents = _parents(rows, selections, templates, rng)
    for turn in range(ASKS_PER_PROPOSAL * count):
        if batch.full or not batch.open_templates():
            break
        shape = shapes.draw(rng) if turn % 2 and shapes.weights else None
        parent = shapes.parent(shape) if shape else parents[turn % len(parents)] if parents else None
        name, move = _next_move(parent, batch, rng, turn)
        study = studies.get(name, shape)
        if move:
            study.enqueue_trial(move[0])
        trial = study.ask(_distributions(templates[name]))
        params = dict(trial.params)
        if not templates[name].feasible(params):
            study.tell(trial, studies.penalty(name, shape))  # ranked below every timed point: TPE leaves the region
            continue
        if batch.knows(name, params):
            study.tell(trial, state=TrialState.FAIL)  # a repeat; the study forgets it
            continue
        # Accepted trials stay RUNNING: TPE's constant liar then steers the next asks away from them.
        batch.add(_explain(name, params, parent, move, rows, shape))
    _fill_at_random(batch, rng)
    return batch.proposals


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
    rows = _rows_of_dialect(population, dialect, templates)
    points = [(r["template"], _params_of(r, templates)) for _, r in rows.iterrows()]
    points += [(p.template, p.params) for p in proposals if not p.by_shape]
    batch = _Batch(0, templates, [(n, p) for n, p in points if p is not None])
    spent = [n for n in templates if n not in batch.open_templates()]
    if not spent:
        return ""
    sizes = ", ".join(f"{n} {batch.size[n]}" for n in spent)
    if len(spent) == len(templates):
        return f"every {dialect} template's feasible space is exhausted ({sizes} points): nothing left to propose"
    rest = ", ".join(n for n in templates if n not in spent)
    return f"feasible space exhausted for {sizes} points; proposing from {rest}"


class _Batch:
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


def _feasible_points(spec: TemplateSpec) -> list[dict] | None:
    """Every point of the space that satisfies the declared constraints, in a fixed order; None if too many."""
    cache_key = (str(spec.path), spec.dialect, json.dumps(spec.params), tuple(c.text for c in spec.constraints))
    if cache_key not in _FEASIBLE:
        if math.prod(len(v) for v in spec.params.values()) > ENUMERATION_LIMIT:
            _FEASIBLE[cache_key] = None
        else:
            space = (dict(zip(spec.params, values, strict=True)) for values in itertools.product(*spec.params.values()))
            _FEASIBLE[cache_key] = [p for p in space if spec.feasible(p)]
    return _FEASIBLE[cache_key]


def _fill_at_random(batch: _Batch, rng: random.Random) -> None:
    """Fill what TPE left (it asked only repeats): untried feasible points at random, one family after another."""
    stuck: set[str] = set()  # families too large to enumerate where 1000 random draws found nothing new
    while not batch.full:
        names = [n for n in batch.open_templates() if n not in stuck]
        if not names:
            return
        for name in names:
            params = _random_untried(name, batch, rng)
            if params is None:
                stuck.add(name)
            else:
                hypothesis = f"{name}: {_show(params)}; an untried feasible point at random (TPE asked only repeats)"
                batch.add(Proposal(name, params, None, None, hypothesis))


def _random_untried(name: str, batch: _Batch, rng: random.Random) -> dict | None:
    spec, space = batch.templates[name], batch.space[name]
    if space is not None:
        left = [p for p in space if not batch.knows(name, p)]
        return rng.choice(left) if left else None
    for _ in range(1000):
        params = {k: rng.choice(v) for k, v in spec.params.items()}
        if spec.feasible(params) and not batch.knows(name, params):
            return params
    return None


def _next_move(parent: _Parent | None, batch: _Batch, rng: random.Random, turn: int) -> tuple:
    """The family to ask this turn, and the parent's next untried neighbour to enqueue (or None: TPE decides)."""
    names = batch.open_templates()
    if parent is None or parent.template.name not in names:
        return names[turn % len(names)], None  # no tunable parent, or its family is spent: cycle over the others
    if len(names) > 1 and rng.random() < SWITCH_PROBABILITY:
        return rng.choice([n for n in names if n != parent.template.name]), None
    name = parent.template.name
    for move in parent.neighbours:
        if not batch.knows(name, move[0]):
            return name, move
    return name, None


def _rows_of_dialect(population: pd.DataFrame, dialect: str, templates: dict) -> pd.DataFrame:
    needed = ["candidate_id", "generation", "template", "params_json", "status", "geomean_us", "target"]
    needed += ["shape_times_json"]
    if population.empty or not set(needed) <= set(population.columns):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in needed})
    rows = population[population["target"].map(DIALECT_OF_TARGET.get) == dialect]
    rows = rows[rows["template"].isin(list(templates))]
    return rows.sort_values(["generation", "candidate_id"], kind="stable").reset_index(drop=True)


def _params_of(row: pd.Series, templates: dict) -> dict | None:
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


def _distributions(spec: TemplateSpec) -> dict[str, CategoricalDistribution]:
    return {name: CategoricalDistribution(values) for name, values in spec.params.items()}


class _Studies:
    """The studies of one call, built when first asked: per template on the geomean, per template and shape on that
    shape's time."""

    def __init__(self, templates: dict, rows: pd.DataFrame, seed: int) -> None:
        self.templates, self.rows, self.seed = templates, rows, seed
        self.studies: dict[tuple[str, str | None], tuple[optuna.Study, float]] = {}

    def get(self, name: str, shape: str | None) -> optuna.Study:
        if (name, shape) not in self.studies:
            index = list(self.templates).index(name)
            offset = 0 if shape is None else 104_729 * (1 + sorted(self._shapes()).index(shape))
            study = _study(self.templates[name], self.rows, self.seed + 7919 * index + offset, shape)
            self.studies[(name, shape)] = study, study.user_attrs["penalty"]
        return self.studies[(name, shape)][0]

    def penalty(self, name: str, shape: str | None) -> float:
        return self.studies[(name, shape)][1]

    def _shapes(self) -> set[str]:
        return {k for text in self.rows["shape_times_json"].dropna() for k in json.loads(text)}


def _study(spec: TemplateSpec, rows: pd.DataFrame, seed: int, shape: str | None = None) -> optuna.Study:
    """A study whose trials are the template's evaluated points: timings to minimise (the geomean, or the time on
    `shape`), failures as infeasible. Its user attribute `penalty` is the value given to failures."""
    study = optuna.create_study(direction="minimize", sampler=TPESampler(seed=seed), study_name=spec.name)
    distributions = _distributions(spec)
    mine = rows[rows["template"] == spec.name]
    values = {i: _value(row, shape) for i, row in mine.iterrows()}
    timed = [v for i, v in values.items() if v is not None and mine.loc[i, "status"] == str(Status.OK)]
    worst = max(timed) if timed else 1.0
    study.set_user_attr("penalty", 2 * worst)
    for i, row in mine.iterrows():
        params = _params_of(row, {spec.name: spec})
        if params is None:
            continue
        if row["status"] == str(Status.OK) and values[i] is not None:
            study.add_trial(create_trial(params=params, distributions=distributions, value=values[i]))
        elif row["status"] in FAILED:
            # TPE reads only COMPLETE, PRUNED and RUNNING trials, so a FAIL trial would not steer it. A complete
            # trial that violates a constraint is ranked below every feasible one: TPE learns to avoid the region.
            trial = create_trial(params=params, distributions=distributions, value=2 * worst, constraints={"ok": 1.0})
            study.add_trial(trial)
    return study


def _value(row: pd.Series, shape: str | None) -> float | None:
    if shape is None:
        return float(row["geomean_us"]) if pd.notna(row["geomean_us"]) else None
    times = json.loads(row["shape_times_json"]) if isinstance(row.get("shape_times_json"), str) else {}
    return float(times[shape]) if shape in times else None


class _Shapes(ShapeEvidence):
    """The per-shape evidence, with each shape's winner as the parent of that shape's turns."""

    def __init__(self, problem: Problem, rows: pd.DataFrame, templates: dict) -> None:
        super().__init__(problem, rows, templates, _params_of)
        self._parents: dict[str, _Parent] = {}

    def parent(self, key: str) -> _Parent:
        """The winner on shape `key`, whose feasible neighbours come first on that shape's turns."""
        if key not in self._parents:
            row, params, times = self.winner(key)
            spec = self.templates[row["template"]]
            moves = _neighbours(spec, params)
            random.Random(key).shuffle(moves)
            geomean = float(row["geomean_us"])
            self._parents[key] = _Parent(row["candidate_id"], None, spec, params, geomean, iter(moves), key, times[key])
        return self._parents[key]

    def composed(self) -> Proposal | None:
        found = self.composition()
        return found and Proposal(None, None, found.parent_id, found.reference_id, found.hypothesis, found.plan)


def _compositions(population: pd.DataFrame, dialect: str) -> set[tuple[str, str]]:
    """The keys of the compositions already evaluated in this dialect."""
    if population.empty or "params_by_shape_json" not in population.columns:
        return set()
    mine = population[population["target"].map(DIALECT_OF_TARGET.get) == dialect]
    return {(COMPOSED, json.dumps(json.loads(t), sort_keys=True)) for t in mine["params_by_shape_json"].dropna()}


def _parents(rows: pd.DataFrame, selections: list[Selection], templates: dict, rng: random.Random) -> list[_Parent]:
    """The selections whose base is a template point of this dialect (free-form kernels cannot be tuned)."""
    parents = []
    for selection in selections:
        mine = rows[rows["candidate_id"] == selection.base_id]
        mine = mine.sort_values("geomean_us", na_position="last", kind="stable")
        params = _params_of(mine.iloc[0], templates) if not mine.empty else None
        if params is None:
            continue
        row, spec = mine.iloc[0], templates[mine.iloc[0]["template"]]
        geomean = float(row["geomean_us"]) if pd.notna(row["geomean_us"]) else None
        moves = _neighbours(spec, params)
        rng.shuffle(moves)  # so that no parameter is always explored first
        parents.append(_Parent(row["candidate_id"], selection.reference_id, spec, params, geomean, iter(moves)))
    return parents


def _neighbours(spec: TemplateSpec, params: dict) -> list[tuple[dict, str, object, object]]:
    """Every feasible point one step away: one parameter moved to an adjacent allowed value."""
    moves = []
    for name, values in spec.params.items():
        i = values.index(params[name])
        for j in (i - 1, i + 1):
            if 0 <= j < len(values) and spec.feasible({**params, name: values[j]}):
                moves.append(({**params, name: values[j]}, name, params[name], values[j]))
    return moves


def _explain(
    name: str, params: dict, parent: _Parent | None, move: tuple | None, rows: pd.DataFrame, shape: str | None = None
) -> Proposal:
    """The proposal with its parent, reference and hypothesis: what changed and why."""
    proposal = _explain_point(name, params, parent, move, rows)
    if shape is None:
        return proposal
    return replace(proposal, hypothesis=f"for shape {shape}: {proposal.hypothesis}")


def _explain_point(name: str, params: dict, parent: _Parent | None, move: tuple | None, rows: pd.DataFrame) -> Proposal:
    if move:
        _, param, old, new = move
        text = f"{name}: {param} {old} -> {new} (neighbour of parent {parent.candidate_id}, {_geomean(parent)})"
        return Proposal(name, params, parent.candidate_id, parent.reference_id, text)
    family = rows[(rows["template"] == name) & (rows["status"] == str(Status.OK)) & rows["geomean_us"].notna()]
    family = family.sort_values(["geomean_us", "candidate_id"], kind="stable")
    evidence = f"TPE sample over {len(family)} timed points of {name}"
    if not family.empty:
        evidence += f" (best {family['geomean_us'].iloc[0]:.1f} us)"
    if parent and parent.template.name == name:
        changes = ", ".join(f"{k} {parent.params[k]} -> {v}" for k, v in params.items() if parent.params[k] != v)
        text = f"{name}: {changes} vs parent {parent.candidate_id} ({_geomean(parent)}); {evidence}"
        return Proposal(name, params, parent.candidate_id, parent.reference_id, text)
    # A switch of family (or no parent): the family's best is the parent, the selected base the reference.
    origin = f"switch from {parent.template.name} (parent {parent.candidate_id}); " if parent else ""
    base = None if family.empty else family["candidate_id"].iloc[0]
    reference = parent.candidate_id if parent else None
    return Proposal(name, params, base, reference, f"{name}: {origin}{_show(params)}; {evidence}")


def _geomean(parent: _Parent) -> str:
    if parent.shape is not None:
        return f"{parent.shape_us:.1f} us on {parent.shape}, the best there"
    return f"geomean {parent.geomean_us:.1f} us" if parent.geomean_us is not None else "not timed"


def _show(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "(no parameters)"
