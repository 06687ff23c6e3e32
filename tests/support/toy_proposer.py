"""A toy proposer for tests: random search over the problem's templates. It lives only here and is registered by
the test that uses it (ksci.proposers.registry.register), so that adding a proposer is shown to need its own module
and a registry entry, nothing else."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ksci.lineage.store import CandidateMeta
from ksci.problem.spec import Problem
from ksci.proposers.protocol import GenerationContext, Proposed, Steps
from ksci.proposers.space import Proposal
from ksci.run import RunSpec

NAME = "toy"


class RandomSearch:
    def propose(self, context: GenerationContext, steps: Steps) -> Proposed:
        spec, dialect = context.spec, context.dialect
        proposals = steps.proposer_step(
            NAME, spec.problem, dialect, context.population, [], spec.children, context.turn_seed, None
        )
        chains = []
        for p in proposals:
            meta = CandidateMeta(
                run=spec.run,
                generation=context.generation,
                proposer=NAME,
                hypothesis=p.hypothesis,
                template=p.template,
                params=p.params,
            )
            chains.append(steps.submit(steps.render(spec.problem, dialect, p.template, p.params), meta))
        return Proposed(chains, note=f"{len(proposals)} random points")

    def conclude(self, context: GenerationContext, rows: list[dict], steps: Steps) -> None:
        return None

    def stop_reason(self, spec: RunSpec) -> str | None:
        return None


def make(llm=None) -> RandomSearch:
    return RandomSearch()


def random_points(
    problem: Problem, dialect: str, population: pd.DataFrame, selections, count: int, seed: int, in_flight
) -> list[Proposal]:
    """The cached step: `count` feasible points drawn at random, none already in the population."""
    rng = np.random.default_rng(seed)
    templates = problem.templates_for(dialect)
    seen = {(r["template"], r["params_json"]) for _, r in population.iterrows()} if len(population) else set()
    points: list[Proposal] = []
    for _ in range(100 * count):
        if len(points) == count:
            break
        template = templates[rng.integers(len(templates))]
        params = {name: values[rng.integers(len(values))] for name, values in template.params.items()}
        params = {k: v.item() if hasattr(v, "item") else v for k, v in params.items()}
        key = (template.name, json.dumps(params, sort_keys=True))
        if template.feasible(params) and key not in seen:
            seen.add(key)
            points.append(Proposal(template.name, params, None, None, f"a random point of {template.name}"))
    return points
