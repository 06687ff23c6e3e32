"""Every proposer an evolution can use, by name: the one place a proposer is registered.

An entry names the proposer's factory and, where it has one, its cached step, both as "module:attribute" so that
this table imports no proposer (the proposers import ksci.run, which checks a RunSpec's proposer against this
table). The command line's --proposer choices and defaults, the RunSpec's checks, the flow's choice of proposer
and the Prefect task that runs a cached step (tasks/proposing.py: proposer_step) all read it. Adding a proposer (a
genetic algorithm, say): its own module under ksci/proposers/ (a Proposer, ksci.proposers.protocol, and a
`make(llm)` that builds it), and one entry here; `register` adds one at run time (tests do).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProposerKind:
    name: str  # --proposer NAME, RunSpec.proposer
    summary: str  # what it does, for the command line's help
    factory: str  # "module:function": (LlmConfig | None) -> Proposer
    # "module:function" of its cached step, or "" for none: (problem: Problem, dialect, population, selections,
    # count, seed, in_flight) -> list[Proposal]. The flow runs it as a Prefect task cached on its inputs and the
    # code under ksci/proposers/ (steps.proposer_step(name, ...)), so a rerun of a generation replays it.
    step: str = ""
    uses_llm: bool = False  # reads an LLM configuration, and learns from the generation just before (no overlap)
    needs_templates: bool = False  # proposes template points: refuses a problem that has none
    default_overlap: int = 0  # `ksci evolve`'s --overlap when none is given

    def make(self, llm: Any = None) -> Any:
        """A new proposer of this kind (`llm`: the run's LlmConfig, or None)."""
        return _resolve(self.factory)(llm)

    def step_function(self) -> Callable[..., list]:
        if not self.step:
            raise ValueError(f"proposer {self.name!r} has no cached step")
        return _resolve(self.step)


REGISTRY: dict[str, ProposerKind] = {}


def register(kind: ProposerKind) -> ProposerKind:
    """Add (or replace) a proposer kind; returns it."""
    if kind.name in ("", "auto") or not kind.name.isidentifier():
        raise ValueError(f"proposer name {kind.name!r}: expected an identifier other than 'auto'")
    REGISTRY[kind.name] = kind
    return kind


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def kind_of(name: str) -> ProposerKind:
    """The registered kind of this name; a ValueError that names the known ones otherwise."""
    if name not in REGISTRY:
        raise ValueError(f"proposer {name!r}: expected one of {', '.join(repr(n) for n in REGISTRY)}")
    return REGISTRY[name]


def _resolve(target: str) -> Callable:
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


register(
    ProposerKind(
        name="tuning",
        summary="Optuna tuning of the seed templates' parameters",
        factory="ksci.proposers.tuning_proposer:make",
        step="ksci.proposers.optuna_search:propose_tuning",
        needs_templates=True,
        default_overlap=1,
    )
)
register(
    ProposerKind(
        name="llm",
        summary="the LLM scientist (seeded by the tuning proposer's generation 0 where the problem has templates)",
        factory="ksci.proposers.scientist:make",
        uses_llm=True,
    )
)
