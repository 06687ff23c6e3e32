"""When each generation of an evolution starts, and with how many children: the run loop, without Prefect.

One loop for every way generations run. Before generation g it waits for the generations g learns from (those before
`horizon(g, overlap)`: all earlier ones without overlap), asks the proposer and the run's limits whether g may start,
gives it the children the candidate cap leaves, and hands it to a launcher. The launcher is what the flow injects: a
subflow called in this thread (its summary is ready when `launch` returns), a subflow in a thread of a pool (ready
when the thread ends), or a flow run of the generation deployment that a worker runs (polled until it ends).
A generation's failure is raised when the loop waits for it; with a pool, the pool's owner waits for those still
running before the error leaves it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ksci.proposers.overlap import horizon
from ksci.run import RunSpec, candidates_before

Summary = dict
Waiter = Callable[[], Summary]  # waits for a launched generation and returns its summary (or raises its error)
Launcher = Callable[[RunSpec, int], Waiter]  # starts generation g with the spec's children


def ready(summary: Summary) -> Waiter:
    """The waiter of a generation that has already run (a launcher that runs it before returning)."""
    return lambda: summary


@dataclass(frozen=True)
class Hooks:
    """What the loop reports: a generation started (with its children), one finished, the run stopped early."""

    started: Callable[[int, int], None]
    finished: Callable[[Summary], None]
    stopped: Callable[[str], None]


def run_generations(
    spec: RunSpec,
    launch: Launcher,
    hooks: Hooks,
    proposer_stop: Callable[[RunSpec], str | None] = lambda spec: None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Start generations 0..spec.generations - 1 as the overlap, the proposer and the run's limits allow; report
    each as it ends, in generation order. `proposer_stop`: the proposer's own reason to stop (an LLM budget spent)."""
    running: dict[int, Waiter] = {}
    given: dict[int, int] = {}  # children given to each generation still running
    started = clock()
    for generation in range(spec.generations):
        for done in sorted(g for g in running if g < horizon(generation, spec.overlap)):
            hooks.finished(running.pop(done)())
            given.pop(done)
        candidates = candidates_before(spec, generation, given)
        stop = proposer_stop(spec) or spec.limits.stop_reason(generation, candidates, clock() - started)
        if stop:
            hooks.stopped(f"evolution {spec.run} stops before generation {generation}: {stop}")
            break
        given[generation] = spec.limits.children(spec.children, candidates)
        hooks.started(generation, given[generation])
        running[generation] = launch(spec.with_children(given[generation]), generation)
    for done in sorted(running):
        hooks.finished(running.pop(done)())
