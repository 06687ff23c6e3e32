"""The tuning proposer: new points of the seed templates' parameter spaces, drawn by Optuna around the parents.

It is the default proposer when no LLM is configured. One in-memory Optuna study per template is rebuilt from the
population on every call (ask-and-tell; TPESampler with a seed), so the lineage stays the only state. A parent's
turn first tries its untried neighbours (one parameter moved to an adjacent allowed value, enqueued with
study.enqueue_trial), then what TPE asks for. Families never tried start from their default; now and then a turn
switches to another family of the dialect.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass

import optuna
import pandas as pd
from optuna.distributions import CategoricalDistribution
from optuna.samplers import TPESampler
from optuna.trial import TrialState, create_trial

from ksci.problem import DIALECT_OF_TARGET, Problem, TemplateSpec
from ksci.results import Status
from ksci.select import Selection

SWITCH_PROBABILITY = 0.1  # chance that a turn tries another template family than the parent's
ASKS_PER_PROPOSAL = 25  # bound on study.ask() calls: a nearly exhausted space returns fewer proposals
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
    template: str
    params: dict
    parent_id: str | None
    reference_id: str | None
    hypothesis: str


@dataclass
class _Parent:
    candidate_id: str
    reference_id: str | None
    template: TemplateSpec
    params: dict
    geomean_us: float | None
    neighbours: Iterator[tuple[dict, str, object, object]]


def propose_tuning(
    problem: Problem,
    dialect: str,
    population: pd.DataFrame,
    selections: list[Selection],
    count: int,
    seed: int,
    in_flight: list[Proposal] | None = None,
) -> list[Proposal]:
    """Up to `count` distinct (template, params) points, none evaluated and none `in_flight` (proposed by a
    generation that is still running); deterministic for a fixed seed."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    templates = {t.name: t for t in problem.templates_for(dialect)}
    if count <= 0 or not templates:
        return []
    rng = random.Random(seed)
    rows = _rows_of_dialect(population, dialect, templates)
    points = [(r["template"], _params_of(r, templates)) for _, r in rows.iterrows()]
    points += [(p.template, p.params) for p in in_flight or []]
    batch = _Batch(count, {_key(name, params) for name, params in points if params is not None})
    tried = set(rows["template"].dropna())
    for name, spec in templates.items():
        if name not in tried:
            hypothesis = f"{name}: default {_show(spec.default)}; family never tried"
            batch.add(Proposal(name, dict(spec.default), None, None, hypothesis))

    studies = {name: _study(spec, rows, seed + 7919 * i) for i, (name, spec) in enumerate(templates.items())}
    parents = _parents(rows, selections, templates, rng)
    for turn in range(ASKS_PER_PROPOSAL * count):
        if batch.full:
            break
        parent = parents[turn % len(parents)] if parents else None
        name, move = _next_move(parent, templates, batch, rng, turn)
        study = studies[name]
        if move:
            study.enqueue_trial(move[0])
        trial = study.ask(_distributions(templates[name]))
        if batch.knows(name, trial.params):
            study.tell(trial, state=TrialState.FAIL)  # a repeat; the study forgets it
            continue
        # Accepted trials stay RUNNING: TPE's constant liar then steers the next asks away from them.
        batch.add(_explain(name, dict(trial.params), parent, move, rows))
    return batch.proposals


class _Batch:
    """The proposals so far, and every (template, params) point already evaluated, in flight or proposed."""

    def __init__(self, count: int, evaluated: set[tuple[str, str]]) -> None:
        self.count, self.seen, self.proposals = count, evaluated, []

    @property
    def full(self) -> bool:
        return len(self.proposals) >= self.count

    def knows(self, template: str, params: dict) -> bool:
        return _key(template, params) in self.seen

    def add(self, proposal: Proposal) -> None:
        if not self.full and not self.knows(proposal.template, proposal.params):
            self.seen.add(_key(proposal.template, proposal.params))
            self.proposals.append(proposal)


def _next_move(parent: _Parent | None, templates: dict, batch: _Batch, rng: random.Random, turn: int) -> tuple:
    """The family to ask this turn, and the parent's next untried neighbour to enqueue (or None: TPE decides)."""
    if parent is None:
        names = list(templates)  # no tunable parent: cycle over the families
        return names[turn % len(names)], None
    if len(templates) > 1 and rng.random() < SWITCH_PROBABILITY:
        return rng.choice([n for n in templates if n != parent.template.name]), None
    name = parent.template.name
    for move in parent.neighbours:
        if not batch.knows(name, move[0]):
            return name, move
    return name, None


def _rows_of_dialect(population: pd.DataFrame, dialect: str, templates: dict) -> pd.DataFrame:
    needed = ["candidate_id", "generation", "template", "params_json", "status", "geomean_us", "target"]
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


def _study(spec: TemplateSpec, rows: pd.DataFrame, seed: int) -> optuna.Study:
    """A study whose trials are the template's evaluated points: timings to minimise, failures as infeasible."""
    study = optuna.create_study(direction="minimize", sampler=TPESampler(seed=seed), study_name=spec.name)
    distributions = _distributions(spec)
    mine = rows[rows["template"] == spec.name]
    ok = mine[(mine["status"] == str(Status.OK)) & mine["geomean_us"].notna()]
    worst = float(ok["geomean_us"].max()) if not ok.empty else 1.0
    for _, row in mine.iterrows():
        params = _params_of(row, {spec.name: spec})
        if params is None:
            continue
        if row["status"] == str(Status.OK) and pd.notna(row["geomean_us"]):
            study.add_trial(create_trial(params=params, distributions=distributions, value=float(row["geomean_us"])))
        elif row["status"] in FAILED:
            # TPE reads only COMPLETE, PRUNED and RUNNING trials, so a FAIL trial would not steer it. A complete
            # trial that violates a constraint is ranked below every feasible one: TPE learns to avoid the region.
            trial = create_trial(params=params, distributions=distributions, value=2 * worst, constraints={"ok": 1.0})
            study.add_trial(trial)
    return study


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
    """Every point one step away: one parameter moved to an adjacent allowed value."""
    moves = []
    for name, values in spec.params.items():
        i = values.index(params[name])
        for j in (i - 1, i + 1):
            if 0 <= j < len(values):
                moves.append(({**params, name: values[j]}, name, params[name], values[j]))
    return moves


def _explain(name: str, params: dict, parent: _Parent | None, move: tuple | None, rows: pd.DataFrame) -> Proposal:
    """The proposal with its parent, reference and hypothesis: what changed and why."""
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
    return f"geomean {parent.geomean_us:.1f} us" if parent.geomean_us is not None else "not timed"


def _show(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "(no parameters)"
