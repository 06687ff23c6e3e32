"""The compose task: a composed candidate's source (ksci.compose), the render task's counterpart for a plan of
template points by shape. Cached like render (inputs and source: tasks/stages.py's CACHED)."""

from __future__ import annotations

from prefect import task

from ksci.compose import compose_kernel
from ksci.problem import load_problem
from tasks.stages import CACHED


@task(name="compose", cache_policy=CACHED)
def compose(problem: str, dialect: str, plan: dict) -> str:
    """The proposer composes only templates that split (ksci.per_shape.composable): a refusal here is a bug."""
    composed = compose_kernel(load_problem(problem), dialect, plan)
    if not composed.ok:
        raise ValueError(f"cannot compose {plan}: {composed.message}")
    return composed.source
