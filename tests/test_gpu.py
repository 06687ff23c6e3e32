"""On a GPU: every shipped seed and correct solution is `ok`, every wrong solution gets its class, never `ok`.

The full 18-shape timing of the seeds is benchmarks/evaluate_seeds.py's job; here each kernel is verified on
every test shape and timed on two benchmark shapes, which exercises the whole pipeline.
"""

from __future__ import annotations

import pytest

from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import Status
from ksci.evaluate.stage_order import evaluate_source
from ksci.problem.compose import compose_kernel, plan_of
from ksci.problem.render import render_kernel
from ksci.problem.spec import DIALECT_OF_TARGET, SUFFIX_OF_DIALECT, list_problems, load_problem, shape_key

pytestmark = pytest.mark.gpu
QUICK = {"min_reps": 5, "max_reps": 20, "budget_s": 0.5}


def _options(problem, target: str, **overrides) -> EvaluationOptions:
    settings = dict(target=target, benchmarks=problem.benchmarks[:2], time_baselines=False, policy=QUICK, timeout_s=300)
    return EvaluationOptions(**{**settings, **overrides})


def _cases(kind: str):
    for name in list_problems():
        for path in load_problem(name).solutions(kind):
            yield pytest.param(name, path, id=f"{name}-{path.name}")


@pytest.mark.parametrize(("name", "path"), list(_cases("wrong")))
def test_wrong_solution_gets_its_class(name, path, gpu_target):
    if path.suffix != SUFFIX_OF_DIALECT[DIALECT_OF_TARGET[gpu_target]]:
        pytest.skip(f"{path.suffix} source on a {gpu_target} GPU")
    problem = load_problem(name)
    expected = path.read_text().splitlines()[0].split("expect:")[1].strip()
    timeout = 60 if expected == "timeout" else 300
    verdict = evaluate_source(problem, path.read_text(), _options(problem, gpu_target, timeout_s=timeout))
    assert verdict.status != Status.OK
    assert verdict.status == expected, f"{verdict.status}: {verdict.message}\n{verdict.harness_log[-2000:]}"


@pytest.mark.parametrize(("name", "path"), list(_cases("correct")))
def test_correct_solution_is_ok(name, path, gpu_target):
    if path.suffix != SUFFIX_OF_DIALECT[DIALECT_OF_TARGET[gpu_target]]:
        pytest.skip(f"{path.suffix} source on a {gpu_target} GPU")
    problem = load_problem(name)
    verdict = evaluate_source(problem, path.read_text(), _options(problem, gpu_target))
    assert verdict.status == Status.OK, f"{verdict.message}\n{verdict.harness_log[-2000:]}"
    assert len(verdict.checks) >= len(problem.tests) * problem.trials
    assert verdict.geomean_us and verdict.geomean_us > 0


def _seeds():
    for name in list_problems():
        for template in load_problem(name).templates:
            yield pytest.param(name, template, id=f"{name}-{template.dialect}-{template.name}")


@pytest.mark.parametrize(("name", "template"), list(_seeds()))
def test_seed_template_default_is_ok(name, template, gpu_target):
    if template.dialect != DIALECT_OF_TARGET[gpu_target]:
        pytest.skip(f"{template.dialect} template on a {gpu_target} GPU")
    problem = load_problem(name)
    verdict = evaluate_source(problem, render_kernel(template), _options(problem, gpu_target))
    assert verdict.status == Status.OK, f"{verdict.message}\n{verdict.harness_log[-2000:]}"


# A tuned point per Hopper family: the point that won the large-N shapes in the H100 sweeps of 2026-11-25
# (kernels/fp8_gemm_kmajor/knowledge.md): BN 256 in two wgmma parts, 3 stages, one temporary; and fp8_gemm's SWAP
# (C^T = B A^T, the tile stored transposed) and B_MN (B transposed inside the GEMM, no pre-pass), each composed with
# the default's A_MN and pre-pass. Three consumers with EPI 2 (the epilogue under the next tile's first K block) is the
# point the tuning evolutions of 2026-11-27 chose on most M = 6144 shapes; with TAIL_N 96 the host may end C's columns
# with narrower tiles (on most test shapes it does: their tiles leave SMs idle).
TUNED = [
    ("fp8_gemm_kmajor", "wgmma", {"BN": 256, "N_PARTS": 2, "STAGES": 3, "OVERLAP": 0}),
    ("fp8_gemm_kmajor", "wgmma", {"BM": 192, "CONSUMERS": 3, "STAGES": 4, "SPLIT_K": 1, "OVERLAP": 0, "EPI": 2}),
    (
        "fp8_gemm_kmajor",
        "wgmma",
        {"BM": 192, "CONSUMERS": 3, "STAGES": 4, "SPLIT_K": 1, "OVERLAP": 0, "EPI": 2, "TAIL_N": 96},
    ),
    ("fp8_gemm", "wgmma", {"BN": 256, "N_PARTS": 2, "STAGES": 3, "OVERLAP": 0}),
    ("fp8_gemm", "wgmma", {"SWAP": 1}),
    ("fp8_gemm", "wgmma", {"B_MN": 3, "STAGES": 4}),
    (
        "fp8_gemm",
        "wgmma",
        {"A_MN": 0, "BM": 192, "CONSUMERS": 3, "STAGES": 4, "SPLIT_K": 1, "OVERLAP": 0, "EPI": 2, "TAIL_N": 96},
    ),
]


@pytest.mark.parametrize(("name", "template", "change"), TUNED)
def test_a_tuned_point_alone_and_composed_with_the_default_is_ok(name, template, change, gpu_target):
    """The point alone, then composed with the default (the tuning proposer's per-shape kernel): the tuned point
    for the first timed shape, the default for every other shape, the test shapes included."""
    if gpu_target != "cuda":
        pytest.skip("a CUDA family")
    problem = load_problem(name)
    spec = problem.template("cuda", template)
    params = {**spec.default, **change}
    assert spec.feasible(params)
    alone = evaluate_source(problem, render_kernel(spec, params), _options(problem, gpu_target))
    assert alone.status == Status.OK, f"{alone.message}\n{alone.harness_log[-2000:]}"
    default = {"template": template, "params": spec.default}
    tuned = {"template": template, "params": params}
    composed = compose_kernel(problem, "cuda", plan_of(default, {shape_key(problem.benchmarks[0]): tuned}))
    assert composed.ok and composed.variants == 2, composed.message
    verdict = evaluate_source(problem, composed.source, _options(problem, gpu_target))
    assert verdict.status == Status.OK, f"{verdict.message}\n{verdict.harness_log[-2000:]}"


def test_spare_harnesses_each_run_the_library_their_go_ahead_names(gpu_target):
    """A spare harness process (ksci.evaluate.run.harness_process.SpareHarnesses) is started before any candidate is known: the
    second candidate here runs in the spare the first one left, and must get its own library, not the first's."""
    from ksci.evaluate.host_stages import compile_candidate, prepare, run_phases
    from ksci.evaluate.run.harness_process import SPARES, Harness

    problem = load_problem("fp8_gemm")
    options = _options(problem, gpu_target)
    suffix = SUFFIX_OF_DIALECT[DIALECT_OF_TARGET[gpu_target]]
    correct = next(p for p in problem.solutions("correct") if p.suffix == suffix)
    wrong = next(p for p in problem.solutions("wrong") if p.name == "wrong_values.cu")  # hipified for ROCm
    SPARES.close()
    verdicts = []
    for path in (correct, wrong):
        prepared = prepare(problem, path.read_text(), gpu_target)
        assert prepared.ok, prepared.note
        compiled = compile_candidate(prepared.source, options)
        assert compiled.ok, compiled.log
        with Harness(problem, compiled.library, options, spares=1) as harness:
            harness.start()
            verdicts.append(run_phases(problem, compiled, options, harness))
    assert SPARES.close() == 1  # the one left by the second candidate
    assert verdicts[0].status == Status.OK, f"{verdicts[0].message}\n{verdicts[0].harness_log[-2000:]}"
    assert verdicts[1].status == Status.WRONG, f"{verdicts[1].message}\n{verdicts[1].harness_log[-2000:]}"


def test_baselines_are_timed_and_checked(gpu_target):
    from ksci.evaluate.host_stages import measure_baselines

    problem = load_problem("fp8_gemm")
    verdict = measure_baselines(problem, _options(problem, gpu_target))
    assert verdict.reference_geomean_us and verdict.reference_geomean_us > 0
    if gpu_target == "cuda":
        assert verdict.vendor_geomean_us, verdict.message  # cuBLASLt through torch._scaled_mm, checked correct
        assert verdict.vendor_geomean_us < verdict.reference_geomean_us


def test_a_harness_started_ahead_runs_on_the_gpu_it_is_then_given(gpu_target):
    """The harness process starts before its GPU is known (ksci.evaluate.run.harness_process.Harness, as a waiting candidate starts it);
    the go-ahead's visible-devices variable must still decide which physical GPU it runs on."""
    import torch

    from ksci.evaluate.run.harness_process import Harness
    from ksci.evaluate.run.visibility import visible_gpus

    problem = load_problem("fp8_gemm")
    options = _options(problem, gpu_target, benchmarks=problem.benchmarks[:1])
    seen = {}
    for device in visible_gpus(gpu_target)[:2]:
        with Harness(problem, None, options) as harness:  # no library: times the baselines only
            harness.start()
            outcome = harness.run(device)
        started = outcome.last("started")
        assert started is not None and outcome.last("result") is not None, outcome.output
        seen[device] = started["fingerprint"]["gpu_uuid"]
        assert seen[device] == str(torch.cuda.get_device_properties(int(device)).uuid)
    assert len(set(seen.values())) == len(seen)


def test_a_run_hands_its_gpu_over_at_its_result_and_the_next_times_only_after_its_exit(
    gpu_target, tmp_path, monkeypatch
):
    """Under any_free_gpu, as the flow's GPU tasks run: a harness run hands its GPU over once its result is in
    (ksci.devices.Lease), so the next run takes the GPU while the first one's process still exits (the driver's
    teardown of its context), and that next run times nothing before the first is gone."""
    import threading
    import time

    import ksci.devices
    from ksci.devices import any_free_gpu
    from ksci.evaluate.run.harness_process import Harness
    from ksci.evaluate.run.visibility import visible_gpus

    monkeypatch.setenv(ksci.devices.LOCK_DIR_ENV, str(tmp_path / "locks"))
    problem = load_problem("fp8_gemm")
    options = _options(problem, gpu_target, benchmarks=problem.benchmarks[:1])
    device = visible_gpus(gpu_target)[0]
    runs: dict[str, dict] = {}
    holding = threading.Event()

    def run(name: str, harness: Harness) -> None:
        with any_free_gpu([device]) as gpu:
            holding.set()
            go = time.monotonic()
            outcome = harness.run(gpu)
            runs[name] = {"go": go, "reaped": time.monotonic(), "outcome": outcome}

    # No library: each times the baselines. Both started (Python, torch) before either takes the GPU.
    with Harness(problem, None, options) as one, Harness(problem, None, options) as other:
        one.start()
        other.start()
        first = threading.Thread(target=run, args=("first", one))
        first.start()
        assert holding.wait(60)
        second = threading.Thread(target=run, args=("second", other))
        second.start()  # waits for the GPU the first holds
        first.join(300)
        second.join(300)
    a, b = runs["first"], runs["second"]
    for r in (a, b):
        assert r["outcome"].last("result") is not None and r["outcome"].events("baseline"), r["outcome"].output
    assert a["outcome"].handed_over_s is not None and a["outcome"].handed_over_s <= a["outcome"].wall_s
    assert b["go"] < a["reaped"]  # the second started while the first was still exiting
    # Its first timed shape was reported after the first process was gone (the exit lock's wait).
    assert b["go"] + b["outcome"].first_s["baseline"] > a["reaped"]
