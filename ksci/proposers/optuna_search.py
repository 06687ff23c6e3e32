"""The tuning proposer: new points of the seed templates' parameter spaces, drawn by Optuna around the parents,
tuned per benchmark shape, and composed into one kernel that dispatches on the shape (docs/tuning.md).

It is the default proposer when no LLM is configured. In-memory Optuna studies are rebuilt from the population on
every call (ask-and-tell; TPESampler with a seed), so the lineage stays the only state and a call is a deterministic
function of the population, the points in flight and the seed. Each call proposes, in this order:
- each family never tried, at its default;
- the composition of the per-shape winners (ksci.problem.compose), when it predicts a gain and was never proposed;
- turns in alternation: a parent's turn (one study per template on the geomean: the parent's untried neighbours
  first, one parameter moved to an adjacent allowed value, and where that move violates a constraint, moved on to
  the nearest feasible point (fewest other parameters moved, at most three), as in "EPI 0 -> 1 (STAGES 5 -> 4 to
  fit)" or "BM 128 -> 192 (CONSUMERS 2 -> 3, STAGES 5 -> 4, OVERLAP 1 -> 0 to fit)"; then what TPE
  asks for; now and then another family), and a shape's turn (a shape drawn by its share of the log-gap between
  the best single point and the best time known on each shape; one study per template and shape on that shape's
  time, from the shape's winner);
- when TPE asks only repeats, untried feasible points at random.
No proposal violates the template's declared constraints (ksci.problem.constraints) or repeats a point evaluated, in flight
or proposed before; a family whose feasible space is spent is skipped (space_note says so).

The spaces themselves (feasible points, which are taken, neighbours, Proposal) are ksci.proposers.space; the
Proposer that runs this search in a generation is ksci.proposers.tuning_proposer.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, replace

import optuna
import pandas as pd
from optuna.distributions import CategoricalDistribution
from optuna.samplers import TPESampler
from optuna.trial import TrialState, create_trial

from ksci.evaluate.results import Status
from ksci.lineage.store import shape_times
from ksci.problem.spec import Problem, TemplateSpec
from ksci.proposers.per_shape import ShapeEvidence
from ksci.proposers.select import Selection
from ksci.proposers.space import Batch, Move, Proposal, composition_keys, neighbours, params_of, rows_of_dialect

SWITCH_PROBABILITY = 0.1  # chance that a turn tries another template family than the parent's
ASKS_PER_PROPOSAL = 25  # bound on study.ask() calls; then untried feasible points at random fill the batch
FAILED = {
    Status.REJECTED,
    Status.COMPILE_ERROR,
    Status.LOAD_ERROR,
    Status.RUNTIME_ERROR,
    Status.TIMEOUT,
    Status.WRONG,
    Status.SUSPICIOUS,
}


@dataclass
class _Parent:
    candidate_id: str
    reference_id: str | None
    template: TemplateSpec
    params: dict
    geomean_us: float | None
    neighbours: Iterator[Move]
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
    rows = rows_of_dialect(population, dialect, templates)
    points = [(r["template"], params_of(r, templates)) for _, r in rows.iterrows()]
    points = [(name, params) for name, params in points if params is not None]
    points += [(p.template, p.params) for p in in_flight or [] if not p.by_shape]
    batch = Batch(count, templates, points)
    batch.seen |= {p.key for p in in_flight or [] if p.by_shape} | composition_keys(population, dialect)
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
    geomean_turns, offset = 0, rng.randrange(max(len(parents) - 1, 1))
    for turn in range(ASKS_PER_PROPOSAL * count):
        if batch.full or not batch.open_templates():
            break
        shape = shapes.draw(rng) if turn % 2 and shapes.weights else None
        parent = shapes.parent(shape) if shape else None
        if not shape and parents:
            parent, geomean_turns = parents[_parent_turn(geomean_turns, len(parents), offset)], geomean_turns + 1
        name, move = _next_move(parent, batch, rng, turn)
        study = studies.get(name, shape)
        if move:
            study.enqueue_trial(move.params)
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


def _parent_turn(turn: int, parents: int, offset: int) -> int:
    """Which parent a parent's turn (the `turn`-th of this call) starts from: the first (the first selection that is
    a template point: under the elitist strategy, the fastest such) every other turn, the others in rank order
    between, from `offset` (drawn per call, so that over the generations every selection gets turns). The
    incumbent's untried neighbours are so walked faster than any other parent's. (Drawing parents[turn % len] on the
    turns between shape turns gave only the even-ranked selections a turn.)"""
    if parents < 2 or turn % 2 == 0:
        return 0
    return 1 + (offset + turn // 2) % (parents - 1)


def _fill_at_random(batch: Batch, rng: random.Random) -> None:
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


def _random_untried(name: str, batch: Batch, rng: random.Random) -> dict | None:
    spec, space = batch.templates[name], batch.space[name]
    if space is not None:
        left = [p for p in space if not batch.knows(name, p)]
        return rng.choice(left) if left else None
    for _ in range(1000):
        params = {k: rng.choice(v) for k, v in spec.params.items()}
        if spec.feasible(params) and not batch.knows(name, params):
            return params
    return None


def _next_move(parent: _Parent | None, batch: Batch, rng: random.Random, turn: int) -> tuple[str, Move | None]:
    """The family to ask this turn, and the parent's next untried neighbour to enqueue (or None: TPE decides)."""
    names = batch.open_templates()
    if parent is None or parent.template.name not in names:
        return names[turn % len(names)], None  # no tunable parent, or its family is spent: cycle over the others
    if len(names) > 1 and rng.random() < SWITCH_PROBABILITY:
        return rng.choice([n for n in names if n != parent.template.name]), None
    name = parent.template.name
    for move in parent.neighbours:
        if not batch.knows(name, move.params):
            return name, move
    return name, None


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
        return {k for text in self.rows["shape_times_json"] for k in shape_times(text)}


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
        params = params_of(row, {spec.name: spec})
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
    times = shape_times(row.get("shape_times_json"))
    return float(times[shape]) if shape in times else None


class _Shapes(ShapeEvidence):
    """The per-shape evidence, with each shape's winner as the parent of that shape's turns."""

    def __init__(self, problem: Problem, rows: pd.DataFrame, templates: dict) -> None:
        super().__init__(problem, rows, templates, params_of)
        self._parents: dict[str, _Parent] = {}

    def parent(self, key: str) -> _Parent:
        """The winner on shape `key`, whose feasible neighbours come first on that shape's turns."""
        if key not in self._parents:
            row, params, times = self.winner(key)
            spec = self.templates[row["template"]]
            moves = neighbours(spec, params)
            random.Random(key).shuffle(moves)
            geomean = float(row["geomean_us"])
            self._parents[key] = _Parent(row["candidate_id"], None, spec, params, geomean, iter(moves), key, times[key])
        return self._parents[key]

    def composed(self) -> Proposal | None:
        found = self.composition()
        return found and Proposal(None, None, found.parent_id, found.reference_id, found.hypothesis, found.plan)


def _parents(rows: pd.DataFrame, selections: list[Selection], templates: dict, rng: random.Random) -> list[_Parent]:
    """The selections whose base is a template point of this dialect (free-form kernels cannot be tuned)."""
    parents = []
    for selection in selections:
        mine = rows[rows["candidate_id"] == selection.base_id]
        mine = mine.sort_values("geomean_us", na_position="last", kind="stable")
        params = params_of(mine.iloc[0], templates) if not mine.empty else None
        if params is None:
            continue
        row, spec = mine.iloc[0], templates[mine.iloc[0]["template"]]
        geomean = float(row["geomean_us"]) if pd.notna(row["geomean_us"]) else None
        moves = neighbours(spec, params)
        rng.shuffle(moves)  # so that no parameter is always explored first
        parents.append(_Parent(row["candidate_id"], selection.reference_id, spec, params, geomean, iter(moves)))
    return parents


def _explain(
    name: str, params: dict, parent: _Parent | None, move: Move | None, rows: pd.DataFrame, shape: str | None = None
) -> Proposal:
    """The proposal with its parent, reference and hypothesis: what changed and why."""
    proposal = _explain_point(name, params, parent, move, rows)
    if shape is None:
        return proposal
    return replace(proposal, hypothesis=f"for shape {shape}: {proposal.hypothesis}")


def _explain_point(name: str, params: dict, parent: _Parent | None, move: Move | None, rows: pd.DataFrame) -> Proposal:
    if move:
        text = f"{name}: {move.describe()} (neighbour of parent {parent.candidate_id}, {_geomean(parent)})"
        return Proposal(name, params, parent.candidate_id, parent.reference_id, text)
    family = rows[(rows["template"] == name) & (rows["status"] == str(Status.OK)) & rows["geomean_us"].notna()]
    family = family.sort_values(["geomean_us", "candidate_id"], kind="stable")
    # With no point of the family passed yet, Optuna's TPE draws at random: say so rather than "over 0 points".
    evidence = f"a random point of {name}, none of whose points has passed yet"
    if not family.empty:
        evidence = f"TPE sample over {len(family)} passed points of {name} (best {family['geomean_us'].iloc[0]:.1f} us)"
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
