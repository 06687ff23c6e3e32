"""What a proposer is: given a generation's context, it proposes children and hands each to the evaluation; after
the generation it may conclude something from the rows (the LLM's findings). Two implement it: the tuning proposer
(ksci.proposers.tuning_proposer: seeds, then Optuna over the templates) and the LLM scientist
(ksci.proposers.scientist). The flow chooses one from the RunSpec through the registry (ksci.proposers.registry, ksci.proposers.choice) and
never asks which.

The steps that are Prefect tasks (select, a proposer's cached step, render, compose, the LLM call, a candidate's evaluation
chain, the wait for it) come in as callables (Steps), so that the proposers are plain Python, tested with fakes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from ksci.errors import Failure
from ksci.evaluate.results import Verdict
from ksci.lineage.store import CandidateMeta
from ksci.problem.spec import DIALECT_OF_TARGET
from ksci.proposers.overlap import horizon
from ksci.run import RunSpec

Chain = Any  # a candidate's submitted evaluation (tasks/: its futures); proposers only hand it back to Steps


class PendingAnswer(Protocol):
    """An LLM call that was sent; result() waits for its Answer (ksci.llm.request), failures included."""

    def result(self) -> Any: ...


@dataclass(frozen=True)
class Steps:
    """The orchestrated steps a proposer calls. Each is a Prefect task (or its submission) in the flow."""

    submit: Callable[[Any, CandidateMeta], Chain]  # a source (or a pending one) -> its evaluation chain
    wait: Callable[[list[Chain]], None]  # until every chain is recorded (or failed)
    verdict: Callable[[Chain], Verdict | None]  # a finished chain's verdict; None when its stages failed
    select: Callable[..., list] | None = None  # (strategy, population, count, seed) -> selections
    # A registered proposer's cached step (ksci.proposers.registry): (name, problem, dialect, population, selections,
    # count, seed, in_flight) -> proposals
    proposer_step: Callable[..., list] | None = None
    render: Callable[..., Any] | None = None  # (problem, dialect, template, params) -> pending source
    compose: Callable[..., Any] | None = None  # (problem, dialect, plan) -> pending source
    ask: Callable[..., PendingAnswer] | None = None  # (config, request, ledger) -> the call, sent
    profile: Callable[[str, str], str] | None = None  # (source, candidate_id) -> profile digest (ksci.profile)
    logger: logging.Logger | logging.LoggerAdapter = field(default_factory=lambda: logging.getLogger("ksci"))


@dataclass(frozen=True)
class GenerationContext:
    """What one generation knows: the run's settings, which generation, and the population it learns from."""

    spec: RunSpec
    generation: int
    population: pd.DataFrame  # the rows of the generations before its horizon, in a stable order

    @property
    def dialect(self) -> str:
        return DIALECT_OF_TARGET[self.spec.target]

    @property
    def turn_seed(self) -> int:
        """The seed of this generation's proposals: a rerun proposes the same, so it replays from the cache."""
        return self.spec.seed * 100_003 + self.generation

    @property
    def learns_from(self) -> int:
        return horizon(self.generation, self.spec.overlap)


@dataclass(frozen=True)
class Proposed:
    """A generation's submitted candidates, a note on them for the summary, and, when the generation must fail (to
    be rerun: an endpoint that stayed down), why."""

    chains: list[Chain]
    note: str = ""
    failure: Failure | None = None


class Proposer(Protocol):
    def propose(self, context: GenerationContext, steps: Steps) -> Proposed:
        """Propose this generation's children and submit each (steps.submit)."""
        ...

    def conclude(self, context: GenerationContext, rows: list[dict], steps: Steps) -> None:
        """After the generation's rows are recorded (the LLM distils findings; tuning has nothing to add)."""
        ...

    def stop_reason(self, spec: RunSpec) -> str | None:
        """Why no further generation may start (a spent LLM budget), or None."""
        ...
