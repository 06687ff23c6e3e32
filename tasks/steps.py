"""The steps a proposer calls during a generation (ksci.proposers.protocol.Steps), bound to Prefect: what it
proposes is rendered, composed, evaluated and recorded through the tasks of tasks/, and each candidate's end is
reported to the run's observer."""

from __future__ import annotations

import pandas as pd
from prefect.futures import wait

from ksci.console.events import observer
from ksci.lineage.store import CandidateMeta
from ksci.proposers.per_shape import best_shape_times
from ksci.proposers.protocol import Steps
from ksci.run import RunSpec
from tasks.compose import compose
from tasks.evaluation import CandidateChain, generation_baselines, submit_candidate
from tasks.llm import ask
from tasks.profile import profile_step
from tasks.proposing import proposer_step, render, select


def generation_steps(spec: RunSpec, generation: int, logger, population: pd.DataFrame) -> Steps:
    """The Prefect tasks a proposer calls: what it proposes is evaluated and recorded through them. The reference
    and the vendor library are timed once for the generation, and every benchmark of it takes their times. With
    --race, each candidate's benchmark races against the best median per shape of the population it was proposed
    from."""
    setup = spec.evaluation()
    race = best_shape_times(population) if spec.race else ()
    baselines = generation_baselines.submit(setup, spec.run, generation)

    def submit(source, meta: CandidateMeta) -> CandidateChain:
        return _reported(submit_candidate(setup, source, meta, race=race, baselines=baselines), meta.generation)

    return Steps(
        submit=submit,
        wait=lambda chains: wait([chain.recorded for chain in chains]),
        verdict=_verdict,
        select=select,
        proposer_step=proposer_step,
        render=render.submit,
        compose=compose.submit,
        ask=ask,
        profile=profile_step(setup, spec.run) if spec.profile else None,
        logger=logger,
    )


def _reported(chain: CandidateChain, generation: int) -> CandidateChain:
    """The chain, whose end (its row recorded, or a stage failed) is reported to the run's observer."""

    def recorded(future) -> None:
        future.wait(0)  # done: takes its final state from the finished thread, not from the API
        row = future.result(raise_on_failure=False) if future.state.is_completed() else None
        observer().candidate_finished(generation, row if isinstance(row, dict) else None)

    chain.recorded.add_done_callback(recorded)
    return chain


def _verdict(chain: CandidateChain):
    """A finished chain's verdict, or None when one of its stages failed."""
    verdict = chain.evaluated.result(raise_on_failure=False)
    return None if isinstance(verdict, BaseException) else verdict
