"""The Prefect tasks of a generation's proposing stages (read the population, select, a proposer's cached step, render), each
body a call into the plain core (ksci/), and the retry condition every task uses. The evaluation's tasks and the
chain a candidate goes through are tasks/evaluation.py.

Caching: a task's result is keyed by its inputs and its source (INPUTS + TASK_SOURCE), and persisted under
data/prefect, so rerunning a generation reuses what finished; render on the problem's templates, a proposer's step
on the proposers' code: tasks/cache_keys.py.
"""

from __future__ import annotations

import pandas as pd
from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from ksci.lineage.store import LineageStore
from ksci.problem.render import render_kernel
from ksci.problem.spec import load_problem
from ksci.proposers.registry import kind_of
from ksci.proposers.select import Selection, select_parents
from ksci.proposers.space import Proposal
from tasks.cache_keys import PROPOSAL_CACHE, RENDER_CACHE

CACHED = INPUTS + TASK_SOURCE


def retry_only_on(error: type[Exception]):
    """A retry_condition_fn that retries a task only when it failed with `error` (or a subclass)."""

    def condition(task, task_run, state) -> bool:
        try:
            state.result()
        except error:
            return True
        except Exception:
            return False
        return False

    return condition


@task(name="read-population")
def read_population(store_root: str, run: str, before_generation: int) -> pd.DataFrame:
    population = LineageStore(store_root).read(run)
    earlier = population[population["generation"] < before_generation]
    # A stable order, so that the proposals (and with them every cache key downstream) are the same on a rerun.
    return earlier.sort_values(["generation", "candidate_id"]).reset_index(drop=True)


@task(name="select", cache_policy=CACHED)
def select(strategy: str, population: pd.DataFrame, count: int, seed: int) -> list[Selection]:
    return select_parents(strategy, population, count, seed)


@task(name="proposer-step", cache_policy=PROPOSAL_CACHE)
def proposer_step(
    proposer: str,
    problem: str,
    dialect: str,
    population: pd.DataFrame,
    selections: list[Selection],
    count: int,
    seed: int,
    in_flight: list[Proposal] | None = None,
) -> list[Proposal]:
    """The cached step of the registered proposer `proposer` (the tuning proposer's: Optuna over the templates'
    parameters, ksci.proposers.optuna_search.propose_tuning)."""
    step = kind_of(proposer).step_function()
    return step(load_problem(problem), dialect, population, selections, count, seed, in_flight)


@task(name="render", cache_policy=RENDER_CACHE)
def render(problem: str, dialect: str, template: str, params: dict) -> str:
    return render_kernel(load_problem(problem).template(dialect, template), params)
