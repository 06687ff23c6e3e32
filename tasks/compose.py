"""The compose task: a composed candidate's source (ksci.problem.compose), the render task's counterpart for a plan of
template points by shape. Cached like render: inputs, source and the problem's template files (tasks/cache_keys.py)."""

from __future__ import annotations

from prefect import task

from ksci.problem.compose import compose_kernel
from ksci.problem.spec import load_problem
from tasks.cache_keys import RENDER_CACHE


@task(name="compose", cache_policy=RENDER_CACHE)
def compose(problem: str, dialect: str, plan: dict) -> str:
    """The proposer composes only templates that split (ksci.proposers.per_shape.composable): a refusal here is a bug."""
    composed = compose_kernel(load_problem(problem), dialect, plan)
    if not composed.ok:
        raise ValueError(f"cannot compose {plan}: {composed.message}")
    return composed.source
