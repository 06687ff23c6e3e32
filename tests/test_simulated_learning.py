"""The simulator's cost model (ksci/backends/cost_model.py) gives a simulated tuning run something to learn: over
5 generations of fp8_gemm (the seeds, then 4 of tuning, with the tuning proposer's own selection and proposals),
the best made-up time improves at least twice after generation 0. Every time here is made up, none measured."""

from __future__ import annotations

import hashlib
import json
import math

import pandas as pd

from ksci.backends.cost_model import point_time_us
from ksci.backends.simulated import SIMULATED_GPU, Simulator
from ksci.lineage.store import Candidate, LineageStore
from ksci.problem.render import render_kernel
from ksci.problem.spec import Problem, load_problem, shape_key
from ksci.proposers.optuna_search import propose_tuning
from ksci.proposers.select import select_parents

GENERATIONS, CHILDREN = 5, 6  # `make evolve GENERATIONS=5 SIMULATE=1`, with RunSpec's default children


def _times(problem: Problem, template: str | None, params: dict | None, by_shape: dict | None) -> dict[str, float]:
    """Per shape: the point's made-up time, or for a composition the time of the point it dispatches the shape to."""
    times = {}
    for shape in problem.benchmarks:
        key = shape_key(shape)
        if by_shape:
            point = by_shape.get("shapes", {}).get(key, by_shape["default"])
            template, params = point["template"], point["params"]
        times[key] = point_time_us(template, params, shape)
    return times


def _row(problem: Problem, generation: int, proposal) -> Candidate:
    times = _times(problem, proposal.template, proposal.params, proposal.by_shape)
    plan = json.dumps(proposal.by_shape, sort_keys=True) if proposal.by_shape else None
    key = json.dumps(proposal.params, sort_keys=True) if proposal.params is not None else None
    return Candidate(
        run="sim",
        problem=problem.name,
        generation=generation,
        candidate_id=hashlib.sha256(f"{proposal.template}{key}{plan}".encode()).hexdigest()[:16],
        proposer="seed" if generation == 0 else "tuning",
        parent_id=proposal.parent_id,
        template=proposal.template,
        params_json=key,
        kind="composed" if plan else "point",
        params_by_shape_json=plan,
        source_path="sources/xx/x.cu",
        target="cuda",
        status="ok",
        geomean_us=math.exp(sum(map(math.log, times.values())) / len(times)),
        shape_times_json=json.dumps(times),
    )


def _bests(tmp_path) -> list[float]:
    """The best made-up geomean after each generation of a simulated tuning run of fp8_gemm."""
    problem, store, bests = load_problem("fp8_gemm"), LineageStore(tmp_path), []
    population = pd.DataFrame()
    for generation in range(GENERATIONS):
        selections = select_parents("elitist", population, CHILDREN, seed=generation) if generation else []
        proposals = propose_tuning(problem, "cuda", population, selections, CHILDREN, seed=generation)
        store.append([_row(problem, generation, p) for p in proposals])
        population = store.read("sim")
        bests.append(float(population["geomean_us"].min()))
    return bests


def test_a_simulated_tuning_run_of_fp8_gemm_improves_its_best_at_least_twice(tmp_path):
    bests = _bests(tmp_path)
    improvements = [g for g in range(1, GENERATIONS) if bests[g] < bests[g - 1]]
    assert len(improvements) >= 2, bests


def test_the_simulator_times_a_rendered_point_by_the_cost_model_and_says_it_is_made_up():
    problem = load_problem("fp8_gemm")
    spec = next(t for t in problem.templates_for("cuda") if t.name == "wgmma")
    source = render_kernel(problem.template("cuda", "wgmma"), spec.default)
    simulator = Simulator()
    verdict = simulator.run(problem, source, simulator.compile(source, "cuda", "sm_90a"), ("benchmark",))
    assert verdict.message == "simulated: made-up timing" and verdict.fingerprint["gpu"] == SIMULATED_GPU
    expected = [point_time_us("wgmma", spec.default, shape) for shape in problem.benchmarks]
    assert [t.kernel.median_us for t in verdict.timings] == expected


def test_the_cost_model_prefers_what_a_gpu_prefers():
    """Directions the model is built to have (each a made-up time, compared with another of the same model)."""
    shape = {"m": 6144, "n": 4608, "k": 7168}
    default = {"BM": 128, "BN": 128, "CONSUMERS": 2, "STAGES": 5, "SPLIT_K": 1}
    time = lambda **changed: point_time_us("wgmma", {**default, **changed}, shape)  # noqa: E731
    assert point_time_us("naive", {"BLOCK_X": 32, "BLOCK_Y": 8}, shape) > 10 * time()  # the family
    assert time(BM=64, BN=64) > time()  # smaller tiles reuse less
    assert time(STAGES=3) > time()  # fewer stages hide less latency
    assert time(CONSUMERS=1) > time()
    small_k = {"m": 1024, "n": 7168, "k": 256}
    assert point_time_us("wgmma", {**default, "SPLIT_K": 4}, small_k) > point_time_us("wgmma", default, small_k)
