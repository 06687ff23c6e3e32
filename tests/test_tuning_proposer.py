"""The tuning proposer as a Proposer (ksci.proposers.tuning_proposer), as plain Python: select and its cached step are
the plain functions the Prefect tasks call, render and submit are fakes. Its search itself: tests/test_propose.py;
under Prefect, on the simulator: tests/test_flows.py."""

from __future__ import annotations

import logging
import threading

import pandas as pd

from ksci.lineage.store import CandidateMeta, empty_frame
from ksci.problem.spec import load_problem
from ksci.proposers.optuna_search import propose_tuning
from ksci.proposers.overlap import open_board
from ksci.proposers.protocol import GenerationContext, Steps
from ksci.proposers.select import select_parents
from ksci.proposers.tuning_proposer import TuningProposer
from ksci.run import RunSpec


def _steps(submitted: list) -> Steps:
    def proposer_step(name, problem, dialect, population, selections, count, seed, in_flight):
        assert name == "tuning"
        return propose_tuning(load_problem(problem), dialect, population, selections, count, seed, in_flight)

    return Steps(
        submit=lambda source, meta: submitted.append((source, meta)) or len(submitted),
        wait=lambda chains: None,
        verdict=lambda chain: None,
        select=select_parents,
        proposer_step=proposer_step,
        render=lambda problem, dialect, template, params: f"render {template} {sorted(params.items())}",
        compose=lambda problem, dialect, plan: f"compose {plan}",
        logger=logging.getLogger("test_tuning_proposer"),
    )


def _context(generation: int = 0, population: pd.DataFrame | None = None, **spec) -> GenerationContext:
    spec = RunSpec(problem="fp8_gemm", run="t", children=3, store_root="unused", **spec)
    return GenerationContext(spec, generation, empty_frame() if population is None else population)


def test_an_empty_population_is_seeded_with_every_templates_default():
    submitted: list = []
    proposed = TuningProposer().propose(_context(), _steps(submitted))
    templates = load_problem("fp8_gemm").templates_for("cuda")
    assert proposed.chains == list(range(1, len(templates) + 1)) and proposed.failure is None
    metas = [meta for _, meta in submitted]
    assert all(isinstance(m, CandidateMeta) and m.proposer == "seed" and m.run == "t" for m in metas)
    assert {m.template for m in metas} == {t.name for t in templates}
    assert all(m.params == load_problem("fp8_gemm").template("cuda", m.template).default for m in metas)
    assert all(source.startswith(f"render {m.template} ") for source, m in submitted)


def test_the_same_generation_proposes_the_same_again():
    first, again = [], []
    TuningProposer().propose(_context(), _steps(first))
    TuningProposer().propose(_context(), _steps(again))
    assert [m for _, m in first] == [m for _, m in again]


def test_overlapping_generations_hand_their_proposals_on_and_never_repeat_them():
    """Generation 1 overlaps generation 0 (overlap 1): it waits for generation 0's proposals and avoids them."""
    got: dict[int, list] = {0: [], 1: []}
    with open_board("unused", "t"):
        later = threading.Thread(
            target=lambda: TuningProposer().propose(_context(1, overlap=1), _steps(got[1])), daemon=True
        )
        later.start()
        TuningProposer().propose(_context(0, overlap=1), _steps(got[0]))
        later.join(60)
    assert got[0] and got[1] and not later.is_alive()
    keys = [(m.template, str(m.params)) for g in (0, 1) for _, m in got[g]]
    assert len(keys) == len(set(keys))


def test_tuning_concludes_nothing_and_never_stops_a_run():
    proposer = TuningProposer()
    assert proposer.conclude(_context(), [{"status": "ok"}], _steps([])) is None
    assert proposer.stop_reason(_context().spec) is None
